"""verifiers' entry point for the taskset id ``vtb-gym`` (``vf-eval vtb-gym``).

verifiers imports the module named after the id and takes the ``Taskset`` and ``Env``
subclasses from ``__all__``; they live in ``vtb_app.integrations.verifiers_env``.
"""

from vtb_app.integrations.verifiers_env import VTBEnv, VTBTaskset

__all__ = ["VTBEnv", "VTBTaskset"]
