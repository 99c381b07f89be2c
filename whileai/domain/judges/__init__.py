"""Judges (a row in, a verdict out), the rewards built on them, and the reward-model judge."""
