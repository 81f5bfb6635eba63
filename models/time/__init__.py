"""Step time and cost: FLOPs, calibrated efficiency, the parallel layouts' communication, collectives, dollars."""
