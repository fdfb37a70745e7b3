"""Every name and binary layout the companion shares with the C++ side, in one place.

The C++ owners are traces/model/run_folder.h (file names in a run folder), runtime/launch/user_job/user_job.h (the DDP_PROFILE_*
switches), runtime/launch/heartbeat/progress.h (the heartbeat record) and traces/model/stages.def (stage ids). This module
mirrors them, and the C++ test tests/runtime/test_companion_contract.cpp loads it (with no torch: it imports nothing
of the package) and fails on any difference. site_entry.py loads it by path too, at a script's start. Names here are
relative to the run folder.
"""
from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable, Dict, Tuple


def _table() -> Any:
    """records_table.py beside this file (the record table the build writes from traces/model/records.def), loaded by
    path: this module is loaded so by those who must not import the package, and as part of it by the companion."""
    spec = importlib.util.spec_from_file_location("_ddp_profile_records_table",
                                                  os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "records_table.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

# --- the switches the outer ddp_profile sets (runtime/launch/user_job/user_job.h) ----------------------------------------------
ENV_RUN = "DDP_PROFILE_RUN"                       # the run folder; unset: the companion does nothing
ENV_MODE = "DDP_PROFILE_MODE"                     # check | record
ENV_VERIFY_STEPS = "DDP_PROFILE_VERIFY_STEPS"     # optimizer steps with tensor dumps
ENV_FAULT = "DDP_PROFILE_FAULT"                   # kind,rank,step
ENV_HOLD_AFTER_SAVE = "DDP_PROFILE_HOLD_AFTER_SAVE"  # k: stop after the k-th dp.save
ENV_SCHEDULE = "DDP_PROFILE_SCHEDULE"             # record: wait,warmup,active
ENV_FORMAT = "DDP_PROFILE_FORMAT"                 # the heartbeat format the running ddp_profile reads

# --- run-folder names (traces/model/run_folder.h) -----------------------------------------------------------------
PROGRESS_DIR = "progress"
VERIFY_DIR = "verify"
SAMPLES, REPLICAS, SUMMARIES = "samples", "replicas", "summaries"
COLLECTIVES, CHECKPOINTS, FINAL = "collectives", "checkpoints", "final"
TRAINING, RESUME_POINTS = "training", "resume_points"
VERIFY_KINDS = (SAMPLES, REPLICAS, SUMMARIES, COLLECTIVES, CHECKPOINTS, FINAL, TRAINING, RESUME_POINTS)


def progress_file(rank: int) -> str:
    return "%s/rank%d.bin" % (PROGRESS_DIR, rank)


def verify_log_file(rank: int, kind: str) -> str:
    return "%s/rank%d.%s.jsonl" % (VERIFY_DIR, rank, kind)


def companion_verify_step_file(rank: int, step: int) -> str:
    return "%s/rank%d_step%d.safetensors" % (VERIFY_DIR, rank, step)


def companion_meta_file(rank: int) -> str:
    return "%s/rank%d.meta.json" % (VERIFY_DIR, rank)


def reference_step_file(step: int) -> str:
    return "%s/reference_step%d.safetensors" % (VERIFY_DIR, step)


def reference_meta_file(step: int) -> str:
    return "%s/reference_step%d.json" % (VERIFY_DIR, step)


BUFFER_SAVE_NAME = "checkpoint.pt"  # the copy's name for a save into a buffer (no path of its own)


def companion_save_copy_file(save: int, rank: int, name: str) -> str:
    """The k-th save's copy keeps the name the script gave it (`name`, its file's or folder's own; checkpoint.pt for a
    save into a buffer): a script that reads its epoch back from the name (epoch3.pt, accelerate's checkpoint_3/)
    resumes from the copy as from its own."""
    return "checkpoints/save%d/rank%d/%s" % (save, rank, name)


FLIGHT_RECORDER_REQUEST = "flight_recorder/request"  # the supervisor asks for Flight Recorder dumps (a hang)


def flight_recorder_dump_file(rank: int) -> str:
    return "flight_recorder/rank%d.pkl" % rank


def kineto_rank_trace_file(rank: int) -> str:
    return "rank%d.pt.trace.json" % rank


# The data path the companion records under --record: one pair of files per process of a rank (the training process,
# each DataLoader worker process), named by the process id.
DATAPATH_DIR = "datapath"


def datapath_events_file(rank: int, pid: int) -> str:
    return "%s/rank%d.p%d.events" % (DATAPATH_DIR, rank, pid)


def datapath_header_file(rank: int, pid: int) -> str:
    return "%s/rank%d.p%d.json" % (DATAPATH_DIR, rank, pid)


# --- the records inside those files (traces/model/records.def), field by field ----------------------------------------
# RECORDS (record -> key -> (type, unit, required)) is records_table.py, which the build writes from records.def and
# holds to it. Types are records.def's words; NESTED + name is a record, NESTED_LIST + name a list of them. A writer
# checks every object against its record (check_record) before writing it: a key the table does not declare, a
# required one missing or null, or a value of another type is a ContractError, never a line the judges misread.
NESTED, NESTED_LIST = "record:", "records:"
RECORDS: Dict[str, Dict[str, Tuple[str, str, bool]]] = _table().RECORDS
# The record each verification log holds, and the two JSON files the companion writes.
VERIFY_RECORDS = {SAMPLES: "samples", REPLICAS: "replicas", SUMMARIES: "summaries", COLLECTIVES: "micro_collectives",
                  CHECKPOINTS: "checkpoints", FINAL: "final_state", TRAINING: "training",
                  RESUME_POINTS: "resume_points"}
META_RECORD, REFERENCE_META_RECORD = "companion_meta", "reference_meta"
DATAPATH_RECORD = "datapath_process"  # the header beside each process's events


class ContractError(ValueError):
    """An object the companion was about to write does not match its record: a bug in the companion."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_TYPES: Dict[str, Callable[[Any], bool]] = {
    "Int": _is_int,
    "UInt": lambda v: _is_int(v) and v >= 0,
    "Float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "Bool": lambda v: isinstance(v, bool),
    "String": lambda v: isinstance(v, str),
    "IntList": lambda v: isinstance(v, (list, tuple)) and all(_is_int(x) for x in v),
    "IntLists": lambda v: isinstance(v, (list, tuple)) and all(
        isinstance(x, (list, tuple)) and all(_is_int(y) for y in x) for x in v),
    "FloatList": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v),
    "StringList": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
    "StringPairs": lambda v: isinstance(v, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in v),
    "StringMap": lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()),
    "IntMap": lambda v: isinstance(v, dict) and all(isinstance(k, str) and _is_int(x) for k, x in v.items()),
    "Json": lambda v: True,
}


def check_record(record: str, obj: Dict[str, Any], where: str = "", prefix: str = "") -> None:
    """Raises ContractError naming the file (or record) and the key, as the C++ reader does ("field 'a.b': ..."),
    when `obj` is not a `record` as RECORDS declares it."""
    fields = RECORDS[record]
    at = "%s: " % (where or record)
    if not isinstance(obj, dict):
        raise ContractError("%sfield '%s': not an object" % (at, prefix.rstrip(".")))
    for k in obj:
        if k not in fields:
            raise ContractError("%sunknown field '%s%s'" % (at, prefix, k))
    for k, (kind, _unit, required) in fields.items():
        v = obj.get(k)
        if v is None:
            if required:
                raise ContractError("%sfield '%s%s': missing" % (at, prefix, k))
            continue
        if kind.startswith(NESTED_LIST):
            if not isinstance(v, (list, tuple)):
                raise ContractError("%sfield '%s%s': not a list" % (at, prefix, k))
            for i, item in enumerate(v):
                check_record(kind[len(NESTED_LIST):], item, where or record, "%s%s[%d]." % (prefix, k, i))
        elif kind.startswith(NESTED):
            check_record(kind[len(NESTED):], v, where or record, "%s%s." % (prefix, k))
        elif not _TYPES[kind](v):
            raise ContractError("%sfield '%s%s': not %s (%r)" % (at, prefix, k, kind, v))


# --- the heartbeat record (runtime/launch/heartbeat/progress.h ProgressRecord), little endian -----------------------------------
HEARTBEAT_SIZE = 520
HEARTBEAT_MAGIC = 0x50524F47
# The record's format: a reader of another version refuses the record, naming both (never misreads it).
HEARTBEAT_FORMAT_VERSION = 2
# field -> (offset, struct format)
HEARTBEAT_FIELDS: Dict[str, Tuple[int, str]] = {
    "magic": (0, "I"),
    "rank": (4, "i"),
    "pid": (8, "i"),
    "state": (12, "i"),
    "step": (16, "q"),
    "epoch": (24, "i"),
    "stage": (28, "i"),
    "last_ns": (32, "q"),
    "bucket": (40, "i"),
    "format_version": (44, "i"),
    "median_step_ns": (48, "q"),
    "reason": (56, "464s"),
}
# RankState
STARTING, RUNNING, DONE, FAILED, TERMINATED = 0, 1, 2, 3, 4
RANK_STATES = {"starting": STARTING, "running": RUNNING, "done": DONE, "failed": FAILED, "terminated": TERMINATED}

# --- the stage and counter ids the heartbeat and the data path name (traces/model/stages.def) ----------------------
STAGES = {"disk_read": 0, "transform": 1, "pin": 2, "h2d": 3, "wait_data": 4, "forward": 5, "backward": 6,
          "allreduce": 7, "wait_comm": 8, "optimizer": 9, "checkpoint": 10, "step": 11, "collate": 21,
          "worker_start": 22}
COUNTERS = {"host_rss_bytes": 0, "cuda_allocated_bytes": 1, "cuda_reserved_bytes": 2, "loader_queue_depth": 3}

# --- one data-path event (traces/model/event.h Event), little endian, 40 bytes ---------------------------------------
# t0, t1, value, step, item, epoch, bucket, micro, stage, kind, lane
EVENT_FORMAT = "<qqQIIHHBBBB"
EVENT_SIZE = 40
EVENT_FIELDS = ("t0", "t1", "value", "step", "item", "epoch", "bucket", "micro", "stage", "kind", "lane")
EVENT_SPAN, EVENT_COUNTER, EVENT_CPU = 0, 1, 2
WAIT_UNKNOWN = 0xFFFFFFFF  # a cpu event's wait (its item, us) when the kernel keeps no schedstat
NO_BUCKET = 0xFFFF


def contract() -> dict:
    """Everything above as one JSON-able dict, with sample names (rank 3, step 7, save 2): what the C++ test compares."""
    return {
        "env": {"run": ENV_RUN, "mode": ENV_MODE, "verify_steps": ENV_VERIFY_STEPS, "fault": ENV_FAULT,
                "hold_after_save": ENV_HOLD_AFTER_SAVE, "schedule": ENV_SCHEDULE, "format": ENV_FORMAT},
        "files": {
            "progress": progress_file(3),
            "verify_logs": {k: verify_log_file(3, k) for k in VERIFY_KINDS},
            "verify_step": companion_verify_step_file(3, 7),
            "meta": companion_meta_file(3),
            "reference_step": reference_step_file(7),
            "reference_meta": reference_meta_file(7),
            "save_copy": companion_save_copy_file(2, 3, "epoch1.pt"),
            "kineto_trace": kineto_rank_trace_file(3),
            "flight_recorder_request": FLIGHT_RECORDER_REQUEST,
            "flight_recorder_dump": flight_recorder_dump_file(3),
            "datapath_events": datapath_events_file(3, 42),
            "datapath_header": datapath_header_file(3, 42),
        },
        "heartbeat": {"size": HEARTBEAT_SIZE, "magic": HEARTBEAT_MAGIC, "format_version": HEARTBEAT_FORMAT_VERSION,
                      "fields": {k: v[0] for k, v in HEARTBEAT_FIELDS.items()},
                      "reason_bytes": int(HEARTBEAT_FIELDS["reason"][1][:-1]), "states": RANK_STATES},
        "stages": STAGES, "counters": COUNTERS,
        "event": {"format": EVENT_FORMAT, "size": EVENT_SIZE, "fields": list(EVENT_FIELDS), "span": EVENT_SPAN,
                  "counter": EVENT_COUNTER, "cpu": EVENT_CPU, "wait_unknown": WAIT_UNKNOWN, "no_bucket": NO_BUCKET},
        "records": {r: {k: {"type": t.split(":", 1)[-1], "nested": t.startswith((NESTED, NESTED_LIST)),
                            "list": t.startswith(NESTED_LIST), "unit": u, "required": req}
                         for k, (t, u, req) in f.items()} for r, f in RECORDS.items()},
        "verify_records": VERIFY_RECORDS, "meta_record": META_RECORD, "reference_meta_record": REFERENCE_META_RECORD,
        "datapath_record": DATAPATH_RECORD,
    }
