"""grpo: token-mean GRPO on terminal-state rewards, DeepSpeed from one CPU to many GPUs."""
