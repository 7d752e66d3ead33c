# See ../__init__.pyi: only cuda.bindings.driver is declared.
