"""Global search over what a person may see: workloads, people and catalog models."""
