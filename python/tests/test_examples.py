"""python/examples run (each asserts its own result against NumPy)."""
import os
import runpy

import pytest

EX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(EX) if f.endswith(".py")))
def test_example(name):
    runpy.run_path(os.path.join(EX, name), run_name="__main__")
