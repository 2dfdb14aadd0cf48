"""The GPU node agent: reads the node's GPUs through NVML and reports to the portal's API with a
node credential. No Django and no database: it runs as a DaemonSet on GPU nodes."""
