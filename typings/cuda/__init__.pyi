# Narrow stub of cuda-bindings (NVIDIA's cuda-python), for pinmon's type checking only: the one module
# pinmon imports (cuda.bindings.driver, in pinmon/trace/engine_cupti.py). cuda-bindings is no
# dependency of pinmon; it comes with cupti-python in the traced program's environment.
