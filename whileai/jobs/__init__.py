"""Training jobs: the bodies (sft, grpo, dpo, rm) that the platform launches by module name, the local worker and the Modal app."""
