"""Collection: reads the machine (NVML, psutil, /proc) into Snapshot objects; no UI, no advice."""
