"""Fleet jobs (node discovery, MIG layouts) are added by the cluster driver work."""
