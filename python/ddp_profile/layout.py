"""Every name and binary layout the companion shares with the C++ side, in one place.

The C++ owners are traces/model/run_folder.h (file names in a run folder), runtime/launch/user_job/user_job.h (the DDP_PROFILE_*
switches), runtime/launch/heartbeat/progress.h (the heartbeat record) and traces/model/stages.def (stage ids). This module
mirrors them, and the C++ test tests/runtime/test_companion_contract.cpp loads it (with no torch: it imports nothing
of the package) and fails on any difference. Names here are relative to the run folder.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

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


def companion_save_copy_file(save: int, rank: int) -> str:
    return "checkpoints/save%d/rank%d.pt" % (save, rank)


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
# record -> key -> (type, unit, required). Types are records.def's words; NESTED + name is a record declared here. A
# writer checks every object against its record (check_record) before writing it: a key the table does not declare,
# a required one missing or null, or a value of another type is a ContractError, never a line the judges misread.
REQUIRED, OPTIONAL = True, False
NESTED = "record:"
RECORDS: Dict[str, Dict[str, Tuple[str, str, bool]]] = {
    "samples": {
        "epoch": ("Int", "", REQUIRED),
        "step": ("Int", "steps", REQUIRED),
        "micro": ("Int", "", REQUIRED),
        "batch": ("Int", "", REQUIRED),
        "indices": ("IntList", "", REQUIRED),
        "sampler_epoch": ("Int", "", OPTIONAL),
    },
    "replicas": {
        "step": ("Int", "steps", REQUIRED),
        "param_hash": ("String", "", REQUIRED),
        "state": ("StringPairs", "", OPTIONAL),
    },
    "tensor_stats": {
        "count": ("Int", "elements", REQUIRED),
        "hash": ("String", "", REQUIRED),
        "mean": ("Float", "", OPTIONAL),
        "std": ("Float", "", OPTIONAL),
        "min": ("Float", "", OPTIONAL),
        "max": ("Float", "", OPTIONAL),
        "l2": ("Float", "", OPTIONAL),
    },
    "summaries": {
        "step": ("Int", "steps", REQUIRED),
        "kind": ("String", "", REQUIRED),
        "name": ("String", "", REQUIRED),
        "micro": ("Int", "", OPTIONAL),
        "stats": (NESTED + "tensor_stats", "", REQUIRED),
    },
    "micro_collectives": {
        "step": ("Int", "steps", REQUIRED),
        "micro": ("Int", "", REQUIRED),
        "sync_flag": ("Bool", "", OPTIONAL),
        "collectives": ("Int", "", OPTIONAL),
        "bytes": ("Int", "bytes", OPTIONAL),
    },
    "checkpoints": {
        "index": ("Int", "", REQUIRED),
        "step": ("Int", "steps", REQUIRED),
        "epoch": ("Int", "", REQUIRED),
        "path": ("String", "", OPTIONAL),
        "abs_path": ("String", "", OPTIONAL),
        "copy": ("String", "", REQUIRED),
        "expected": ("StringList", "", REQUIRED),
        "found": ("StringList", "", REQUIRED),
        "epoch_boundary": ("Bool", "", REQUIRED),
        "rng_untouched": ("StringList", "", REQUIRED),
    },
    "final_state": {
        "name": ("String", "", REQUIRED),
        "hash": ("String", "", REQUIRED),
    },
    "resume_points": {
        "after_save": ("Int", "", REQUIRED),
        "step": ("Int", "steps", REQUIRED),
        "items": ("StringPairs", "", REQUIRED),
    },
    "nonfinite_layer": {
        "layer": ("String", "", OPTIONAL),
        "error": ("String", "", OPTIONAL),
    },
    "training": {
        "step": ("Int", "steps", REQUIRED),
        "rss": ("Int", "bytes", REQUIRED),
        "heap": ("Int", "bytes", OPTIONAL),
        "cuda_allocated": ("Int", "bytes", OPTIONAL),
        "cuda_reserved": ("Int", "bytes", OPTIONAL),
        "params": ("Int", "", OPTIONAL),
        "forwards": ("Int", "", OPTIONAL),
        "output_finite": ("Bool", "", OPTIONAL),
        "model_in_eval": ("Bool", "", OPTIONAL),
        "eval_modules": ("StringList", "", OPTIONAL),
        "grad_zero": ("StringList", "", OPTIONAL),
        "grad_nonfinite": ("StringList", "", OPTIONAL),
        "grad_none": ("StringList", "", OPTIONAL),
        "unchanged": ("StringList", "", OPTIONAL),
        "lrs": ("FloatList", "", OPTIONAL),
        "scheduler_steps": ("Int", "", OPTIONAL),
        "backwards": ("Int", "", OPTIONAL),
        "stale_grads": ("Bool", "", OPTIONAL),
        "step_before_backward": ("Bool", "", OPTIONAL),
        "outside_ddp": ("StringList", "", OPTIONAL),
        "first_nonfinite_layer": (NESTED + "nonfinite_layer", "", OPTIONAL),
    },
    "sampler_info": {
        "class": ("String", "", OPTIONAL),
        "is_distributed": ("Bool", "", REQUIRED),
        "dataset_size": ("Int", "items", OPTIONAL),
        "shuffle": ("Bool", "", OPTIONAL),
        "seed": ("Int", "", OPTIONAL),
        "drop_last": ("Bool", "", OPTIONAL),
        "num_replicas": ("Int", "", OPTIONAL),
        "rank": ("Int", "", OPTIONAL),
    },
    "probe_info": {
        "class": ("String", "", OPTIONAL),
        "size": ("Int", "items", OPTIONAL),
        "items": ("Json", "", OPTIONAL),
        "random_items": ("IntList", "", OPTIONAL),
        "not_probed": ("String", "", OPTIONAL),
    },
    "version_info": {
        "torch": ("String", "", REQUIRED),
        "python": ("String", "", REQUIRED),
        "cuda": ("String", "", OPTIONAL),
        "companion": ("String", "", REQUIRED),
    },
    "companion_meta": {
        "rank": ("Int", "", REQUIRED),
        "world_size": ("Int", "ranks", REQUIRED),
        "local_rank": ("Int", "", REQUIRED),
        "pid": ("Int", "", REQUIRED),
        "host": ("String", "", REQUIRED),
        "mode": ("String", "", REQUIRED),
        "found_by": ("String", "", REQUIRED),
        "launch": ("Json", "", REQUIRED),
        "backend": ("String", "", REQUIRED),
        "device": ("Json", "", REQUIRED),
        "versions": (NESTED + "version_info", "", REQUIRED),
        "seeds": ("Json", "", REQUIRED),
        "config": ("StringList", "", REQUIRED),
        "start_time": ("String", "", REQUIRED),
        "batch": ("Json", "", OPTIONAL),
        "sampler": (NESTED + "sampler_info", "", REQUIRED),
        "loader": ("Json", "", REQUIRED),
        "model": ("Json", "", REQUIRED),
        "optimizer": ("String", "", REQUIRED),
        "scheduler": ("String", "", OPTIONAL),
        "scaler": ("Bool", "", REQUIRED),
        "dropout_off_modules": ("Int", "", REQUIRED),
        "forward_random_beyond_dropout": ("Bool", "", REQUIRED),
        "optimizer_steps": ("Int", "steps", REQUIRED),
        "epochs": ("Int", "", REQUIRED),
        "loss_fn": ("Bool", "", REQUIRED),
        "params_outside_optimizer": ("StringList", "", OPTIONAL),
        "scheduler_steps_per_optimizer_step": ("Int", "", OPTIONAL),
        "scheduler_rule": ("String", "", OPTIONAL),
        "dataset_probe": (NESTED + "probe_info", "", OPTIONAL),
        "reference_error": ("String", "", OPTIONAL),
        "exit": ("String", "", OPTIONAL),
    },
    "reference_meta": {
        "batch_sizes": ("Json", "", REQUIRED),
        "kinds": ("Json", "", REQUIRED),
    },
    "datapath_process": {
        "rank": ("Int", "", REQUIRED),
        "pid": ("Int", "", REQUIRED),
        "role": ("String", "", REQUIRED),
        "lanes": ("StringList", "", REQUIRED),
        "loader": ("Int", "", OPTIONAL),
        "worker": ("Int", "", OPTIONAL),
        "train_loader": ("Int", "", OPTIONAL),
        "clock_offset_ns": ("Int", "ns", OPTIONAL),
        "clock_uncertainty_ns": ("Int", "ns", OPTIONAL),
        "clock_rounds": ("Int", "", OPTIONAL),
        "transform_steps": ("Json", "", OPTIONAL),
    },

}
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
    "Float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "Bool": lambda v: isinstance(v, bool),
    "String": lambda v: isinstance(v, str),
    "IntList": lambda v: isinstance(v, (list, tuple)) and all(_is_int(x) for x in v),
    "FloatList": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v),
    "StringList": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
    "StringPairs": lambda v: isinstance(v, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in v),
    "Json": lambda v: True,
}


def check_record(record: str, obj: Dict[str, Any], where: str = "", prefix: str = "") -> None:
    """Raises ContractError naming the file (or record) and the key, as the C++ reader does ("field 'a.b': ..."),
    when `obj` is not a `record` as RECORDS declares it."""
    fields = RECORDS[record]
    at = "%s: " % (where or record)
    for k in obj:
        if k not in fields:
            raise ContractError("%sunknown field '%s%s'" % (at, prefix, k))
    for k, (kind, _unit, required) in fields.items():
        v = obj.get(k)
        if v is None:
            if required:
                raise ContractError("%sfield '%s%s': missing" % (at, prefix, k))
            continue
        if kind.startswith(NESTED):
            if not isinstance(v, dict):
                raise ContractError("%sfield '%s%s': not an object" % (at, prefix, k))
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
EVENT_SPAN, EVENT_COUNTER = 0, 1
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
            "save_copy": companion_save_copy_file(2, 3),
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
                  "counter": EVENT_COUNTER, "no_bucket": NO_BUCKET},
        "records": {r: {k: {"type": t[len(NESTED):] if t.startswith(NESTED) else t, "nested": t.startswith(NESTED),
                            "unit": u, "required": req} for k, (t, u, req) in f.items()} for r, f in RECORDS.items()},
        "verify_records": VERIFY_RECORDS, "meta_record": META_RECORD, "reference_meta_record": REFERENCE_META_RECORD,
        "datapath_record": DATAPATH_RECORD,
    }
