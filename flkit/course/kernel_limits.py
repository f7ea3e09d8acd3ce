"""The time limits of a grading kernel: nbgrader's ``Execute`` with a kill where it only interrupts.

nbgrader interrupts a cell at its timeout and goes on with the next cell. A submission that
catches ``KeyboardInterrupt`` keeps its kernel busy, so every later cell times out in turn and
the grading of that notebook never ends. :class:`LimitedExecute` interrupts a cell at its timeout
and waits ``grace`` seconds for it to stop; a cell still running then has its kernel (the whole
process group) killed, and the cells after it are not run (they score 0, with a note saying why).
The whole notebook also has a total time limit: each cell's timeout is cut to what is left of it,
and a cell still running at the limit has its kernel killed at once.

Every kernel's process group is written to ``pid_file`` so that the process grading the notebook
can be killed from outside with its kernel (:mod:`.autograde`), whatever the kernel does.
"""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path
from queue import Empty

from nbclient.util import ensure_async
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Float, Unicode

#: seconds a cell has to stop after its interrupt before its kernel is killed
GRACE = 10.0
#: ``ename`` of the error output a timed-out cell gets (nbgrader's own name)
TIMEOUT = "CellTimeoutError"
#: ``ename`` of the error output of a cell left unrun after its kernel was killed
NOT_RUN = "NotRunError"


def _error(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[evalue])


class LimitedExecute(Execute):
    """nbgrader's ``Execute`` that kills a kernel which does not stop at its cell timeout."""

    notebook_timeout = Float(0.0, help="total seconds for the notebook (0: no limit)").tag(
        config=True
    )
    grace = Float(GRACE, help="seconds a cell has to stop after its interrupt").tag(config=True)
    pid_file = Unicode("", help="where to write the kernel's process group").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        total = self.notebook_timeout
        self._deadline = time.monotonic() + total if total > 0 else None
        self._killed = ""  # why the kernel was killed ("" while it runs)
        return super().preprocess(nb, resources, km)

    async def async_start_new_kernel(self, **kwargs) -> None:
        await super().async_start_new_kernel(**kwargs)
        prov = getattr(self.km, "provisioner", None)
        if self.pid_file and prov is not None and getattr(prov, "pgid", None):
            Path(self.pid_file).write_text(str(prov.pgid), encoding="utf-8")

    def preprocess_cell(self, cell, resources, index):
        if self._killed and cell.cell_type == "code" and cell.source.strip():
            cell.outputs = [_error(NOT_RUN, f"not run: {self._killed}")]
            cell.execution_count = None
            return cell, self.resources
        return super().preprocess_cell(cell, resources, index)

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        if self._deadline is None:
            return timeout
        left = max(1, math.ceil(self._deadline - time.monotonic()))
        return left if timeout is None else min(timeout, left)

    def _past_total(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline - 0.5

    async def _async_handle_timeout(self, timeout, cell=None):
        if not self._past_total():
            await ensure_async(self.km.interrupt_kernel())
            try:  # the interrupted cell's reply: it stopped, the next cells can run
                await ensure_async(self.kc.shell_channel.get_msg(timeout=self.grace))
                return {"content": {**self.error_on_timeout, "status": "error"}}
            except Empty:
                why = (
                    f"the cell ran past the {timeout} s cell timeout and did not stop when "
                    "interrupted, so its kernel was killed"
                )
        else:
            why = (
                f"the notebook ran past its total time limit of {self.notebook_timeout:g} s, "
                "so its kernel was killed"
            )
        self._killed = f"an earlier cell timed out: {why}"
        await ensure_async(self.km.signal_kernel(signal.SIGKILL))
        # the dead kernel sends no more output: do not wait for it
        self.iopub_timeout, self.raise_on_iopub_timeout = 0, False
        return {"content": {"ename": TIMEOUT, "evalue": why, "traceback": [why], "status": "error"}}
