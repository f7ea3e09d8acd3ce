"""JupyterLab in headless Chromium for the browser smoke test (``make test-ui``): a server on a free
port of 127.0.0.1 over a scratch copy of the notebooks, and a selenium driver with helpers that
wait on explicit conditions (kernel idle, every cell executed, an image changed), never on fixed
sleeps."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM = os.environ.get("FLKIT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FLKIT_CHROMEDRIVER", "/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[2]

# the JupyterLab shell of the page and its current notebook panel
PANEL = "const app = window.jupyterapp; const p = app && app.shell.currentWidget;"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check, timeout: float, every: float = 0.05):
    """``check()``'s first truthy value, polled every ``every`` s; TimeoutError after
    ``timeout`` s."""
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(f"waited {timeout:g} s for {what}")
        time.sleep(every)


class Lab:
    """``jupyter lab`` serving a copy of ``notebooks`` (so a save never touches the checkout)."""

    def __init__(self, scratch: Path, notebooks: list[Path], env: dict):
        self.scratch = scratch
        self.root = scratch / "notebooks"
        self.root.mkdir(parents=True)
        for nb in notebooks:
            shutil.copy2(nb, self.root / nb.name)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        settings = scratch / "lab-settings" / "@jupyterlab"
        for rel, value in (
            ("notebook-extension/tracker.jupyterlab-settings", {"windowingMode": "none"}),
            (
                "apputils-extension/notification.jupyterlab-settings",
                {"fetchNews": "false", "checkForUpdates": False},
            ),
        ):
            (settings / rel).parent.mkdir(parents=True, exist_ok=True)
            (settings / rel).write_text(json.dumps(value))
        full_env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "JUPYTERLAB_SETTINGS_DIR": str(scratch / "lab-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(scratch / "lab-workspaces"),
            "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
            **env,
        }
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.expose_app_in_browser=True",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log = scratch / "jupyter.log"
        self._logf = open(self.log, "w")
        self.proc = subprocess.Popen(
            cmd, env=full_env, stdout=self._logf, stderr=subprocess.STDOUT, start_new_session=True
        )

        def up():
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited; see {self.log}")
            try:
                urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2)
                return True
            except OSError:
                return False

        wait_for("jupyter lab to answer", up, timeout=120, every=0.5)

    def close(self):
        try:
            req = urllib.request.Request(
                f"{self.url}/api/shutdown",
                method="POST",
                headers={"Authorization": f"token {self.token}"},
            )
            urllib.request.urlopen(req, timeout=10)
            self.proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(15)
        self._logf.close()


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    o = Options()
    o.binary_location = CHROMIUM
    for a in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--disable-extensions",
        "--mute-audio",
    ):
        o.add_argument(a)
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)
    d.set_window_size(1400, 1000)
    d.set_script_timeout(60)
    return d


class Notebook:
    """One notebook open in the browser."""

    def __init__(self, driver, lab: Lab, name: str):
        self.d, self.lab, self.name = driver, lab, name
        driver.get(f"{lab.url}/lab/tree/{name}?token={lab.token}&reset")
        wait_for(
            f"{name} to open with a kernel",
            lambda: self.js(
                "return !!(p && p.context && p.context.path.endsWith(arguments[0]) && "
                "p.sessionContext && p.sessionContext.session && "
                "p.sessionContext.session.kernel && p.content.widgets.length);",
                name,
            ),
            timeout=180,
            every=0.5,
        )
        self.js("app.shell.collapseLeft(); app.shell.collapseRight();")
        self.wait_idle(180)
        # JupyterLab writes the kernel's spec and language_info into the notebook once these
        # two promises resolve; callbacks chained now run after its own
        self.d.execute_async_script(
            PANEL + "const done = arguments[arguments.length - 1];"
            "const k = p.sessionContext.session.kernel;"
            "Promise.all([k.info, k.spec]).then(() => setTimeout(() => done(true), 0));"
        )

    def js(self, body: str, *args):
        return self.d.execute_script(PANEL + body, *args)

    def kernel_status(self):
        return self.js("const k = p.sessionContext.session.kernel; return k ? k.status : null;")

    def wait_idle(self, timeout: float):
        wait_for(f"{self.name}'s kernel idle", lambda: self.kernel_status() == "idle", timeout)

    def dirty(self) -> bool:
        return bool(self.js("return p.context.model.dirty;"))

    def run_all(self, timeout: float):
        """Run every cell and wait until each code cell has an execution count and the kernel
        is idle; TimeoutError names the cell still running."""
        # not returned: WebDriver would wait for the command's promise (every cell done)
        self.js("app.commands.execute('notebook:run-all-cells'); return true;")

        def done():
            state = self.js(
                "const cells = p.content.widgets.filter(c => c.model.type === 'code');"
                "return {left: cells.filter(c => !c.model.executionCount).length,"
                " running: cells.findIndex(c => c.node.querySelector('.jp-InputArea-prompt')"
                "   .textContent.includes('*'))};"
            )
            self._running = state["running"]
            return state["left"] == 0 and state["running"] < 0 and self.kernel_status() == "idle"

        try:
            wait_for(f"{self.name} to run", done, timeout, every=1.0)
        except TimeoutError as e:
            raise TimeoutError(f"{e}; code cell {self._running} still running") from None

    def notebook_json(self) -> dict:
        return json.loads(self.js("return JSON.stringify(p.content.model.toJSON());"))

    def page_text(self) -> str:
        return self.js("return p.content.node.innerText;")

    def widget_outputs(self) -> list[dict]:
        """Every output that holds a widget view: whether it rendered as a control."""
        return self.js(
            "const m = 'application/vnd.jupyter.widget-view+json';"
            "return Array.from(p.content.node.querySelectorAll('.jp-OutputArea-output'))"
            ".filter(o => o.getAttribute('data-mime-type') === m).map(o => ({"
            " text: o.innerText.slice(0, 200),"
            " control: !!o.querySelector('.jupyter-widgets.widget-inline-hbox, "
            "   .jupyter-widgets.widget-box, .widget-slider, .widget-image, .widget-html, "
            "   .widget-hprogress, .widget-label, .widget-toggle-buttons')}));"
        )

    def demo_cells(self) -> list[int]:
        """Indexes of the cells whose output holds a slider and an image (the demos)."""
        return self.js(
            "return p.content.widgets.map((c, i) => [c, i]).filter(([c, i]) => "
            "c.node.querySelector('.jp-OutputArea .widget-slider') && "
            "c.node.querySelector('.jp-OutputArea img.widget-image')).map(([c, i]) => i);"
        )

    def cell(self, i: int):
        node = self.js("return p.content.widgets[arguments[0]].node;", i)
        self.d.execute_script("arguments[0].scrollIntoView({block: 'start'});", node)
        return node

    def image_src(self, i: int) -> str:
        return self.js(
            "const img = p.content.widgets[arguments[0]].node.querySelector("
            "'.jp-OutputArea img.widget-image'); return img ? img.src : null;",
            i,
        )

    def move_first_slider(self, i: int) -> float:
        """Press the right-arrow key on the first slider of cell ``i`` (one step, as a reader
        does); returns the time it was pressed (time.monotonic)."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        handle = self.cell(i).find_element(
            By.CSS_SELECTOR, ".widget-slider .noUi-handle, .widget-slider input[type=range]"
        )
        self.d.execute_script("arguments[0].focus();", handle)
        t0 = time.monotonic()
        handle.send_keys(Keys.ARROW_RIGHT)
        return t0

    def shutdown(self):
        self.js("return p.sessionContext.shutdown();")
