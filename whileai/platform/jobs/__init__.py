"""Training jobs: the runner that starts and watches them, and the job bodies (sft, grpo, dpo, rm)."""
