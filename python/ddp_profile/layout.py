"""Every name and binary layout the companion shares with the C++ side, in one place.

The C++ owners are traces/model/run_folder.h (file names in a run folder), runtime/launch/user_job.h (the DDP_PROFILE_*
switches), runtime/launch/progress.h (the heartbeat record) and traces/model/stages.def (stage ids). This module
mirrors them, and the C++ test tests/runtime/test_companion_contract.cpp loads it (with no torch: it imports nothing
of the package) and fails on any difference. Names here are relative to the run folder.
"""
from __future__ import annotations

from typing import Dict, Tuple

# --- the switches the outer ddp_profile sets (runtime/launch/user_job.h) ----------------------------------------------
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


def verify_step_file(rank: int, step: int) -> str:
    return "%s/rank%d_step%d.pt" % (VERIFY_DIR, rank, step)


def companion_meta_file(rank: int) -> str:
    return "%s/rank%d.meta.json" % (VERIFY_DIR, rank)


def reference_step_file(step: int) -> str:
    return "%s/reference_step%d.pt" % (VERIFY_DIR, step)


def reference_meta_file(step: int) -> str:
    return "%s/reference_step%d.json" % (VERIFY_DIR, step)


def companion_save_copy_file(save: int, rank: int) -> str:
    return "checkpoints/save%d/rank%d.pt" % (save, rank)


FLIGHT_RECORDER_REQUEST = "flight_recorder/request"  # the supervisor asks for Flight Recorder dumps (a hang)


def flight_recorder_dump_file(rank: int) -> str:
    return "flight_recorder/rank%d.pkl" % rank


def kineto_rank_trace_file(rank: int) -> str:
    return "rank%d.pt.trace.json" % rank


# --- the heartbeat record (runtime/launch/progress.h ProgressRecord), little endian -----------------------------------
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

# --- the stage ids the heartbeat names (traces/model/stages.def) --------------------------------------------------
STAGES = {"wait_data": 4, "forward": 5, "backward": 6, "optimizer": 9, "checkpoint": 10, "step": 11}


def contract() -> dict:
    """Everything above as one JSON-able dict, with sample names (rank 3, step 7, save 2): what the C++ test compares."""
    return {
        "env": {"run": ENV_RUN, "mode": ENV_MODE, "verify_steps": ENV_VERIFY_STEPS, "fault": ENV_FAULT,
                "hold_after_save": ENV_HOLD_AFTER_SAVE, "schedule": ENV_SCHEDULE, "format": ENV_FORMAT},
        "files": {
            "progress": progress_file(3),
            "verify_logs": {k: verify_log_file(3, k) for k in VERIFY_KINDS},
            "verify_step": verify_step_file(3, 7),
            "meta": companion_meta_file(3),
            "reference_step": reference_step_file(7),
            "reference_meta": reference_meta_file(7),
            "save_copy": companion_save_copy_file(2, 3),
            "kineto_trace": kineto_rank_trace_file(3),
            "flight_recorder_request": FLIGHT_RECORDER_REQUEST,
            "flight_recorder_dump": flight_recorder_dump_file(3),
        },
        "heartbeat": {"size": HEARTBEAT_SIZE, "magic": HEARTBEAT_MAGIC, "format_version": HEARTBEAT_FORMAT_VERSION,
                      "fields": {k: v[0] for k, v in HEARTBEAT_FIELDS.items()},
                      "reason_bytes": int(HEARTBEAT_FIELDS["reason"][1][:-1]), "states": RANK_STATES},
        "stages": STAGES,
    }
