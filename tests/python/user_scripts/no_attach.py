"""A training script that never calls ddp_profile.attach: `ddp_profile --check -- ...` must say what to add (exit 2)."""
import ddp_profile  # noqa: F401  (imported, never attached)

print("training without the companion attached")
