"""A real local Ray cluster (issue 21 §2): ``ray start --head`` on loopback,
a sweep, an oracle check, an oracle campaign and a property campaign run on
it give the same bytes as in one process; a Ray worker that dies is named
and its cases run again. Marked ``ray``: deselected unless SERQ_RAY=1 and Ray is installed
(tests/conftest.py); the head takes about 20 s and 1 GB to start."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def head():
    """A Ray head on 127.0.0.1, its processes in a session of their own, ended (that session alone) at the end.
    Ray 2.60 replaces --node-ip-address 127.0.0.1 by the machine's interface address unless
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER is 0 (its switch for a cluster of one machine): with it, the GCS and the
    raylet listen on loopback alone and name it (test_the_head_is_on_loopback)."""
    ray = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    port = free_port()
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must be under 108 characters
    process = subprocess.Popen([ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                                "--num-cpus", "2", "--include-dashboard=false", "--disable-usage-stats",
                                "--temp-dir", temp, "--block"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               env=dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0"))
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"ray start --head did not come up (status {process.poll()})")
                time.sleep(0.5)
        time.sleep(3)  # the raylet registers after the GCS answers
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        shutil.rmtree(temp, ignore_errors=True)


def test_the_head_is_on_loopback(head):
    """Every address the head's processes were given is 127.0.0.1 (not the machine's interface address)."""
    port = head.rpartition(":")[2]
    shown = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    lines = [line for line in shown.splitlines() if "gcs-address=" in line and f":{port}" in line]
    assert lines, "no process of the head names its GCS address"
    for line in lines:
        for word in line.split():
            if word.startswith(("--node-ip-address=", "--node_ip_address=", "--gcs-address=")):
                assert word.split("=", 1)[1].split(":")[0] == "127.0.0.1", word


def serq(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    return subprocess.run([sys.executable, "-m", "semantics", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def same_output(argv: list[str], address: str, status: int = 0) -> None:
    here = serq(*argv)
    there = serq(*argv, "--ray", address)
    assert here.returncode == there.returncode == status, there.stderr[-2000:]
    assert here.stdout == there.stdout


def test_a_sweep_on_ray_is_the_same_bytes(head):
    same_output(["sweep", "examples/single-turn/mm1.sq", "--set", "lambda=0.5:0.8:0.1", "--horizon", "300",
                 "--warmup", "0", "--seeds", "3", "--json"], head)


def test_oracle_check_on_ray_is_the_same_bytes(head):
    # serve.jsonl#311 is D11, the documented vLLM divergence: one failure, exit 1, on both
    same_output(["oracle", "check", "../shared/oracle/vllm", "oracle/data/campaign/serve.jsonl"], head, status=1)


def test_an_oracle_campaign_on_ray_reports_the_same(head, tmp_path):
    argv = ["oracle", "campaign", "200", "--seed", "1", "--kind", "scenario", "--recorded",
            "oracle/data/campaign/scenarios.jsonl"]
    here = serq(*argv, "--report", str(tmp_path / "here.jsonl"))
    there = serq(*argv, "--report", str(tmp_path / "there.jsonl"), "--ray", head)
    assert here.returncode == there.returncode == 0, there.stderr[-2000:]
    assert (tmp_path / "here.jsonl").read_bytes() == (tmp_path / "there.jsonl").read_bytes()
    assert here.stdout.split(" (")[0] == there.stdout.split(" (")[0]  # the summary but for its seconds


def test_a_property_campaign_on_ray_is_the_same_bytes(head, tmp_path):
    """The Ray workers import the test tree's generators themselves (semantics.property_campaign.campaigns) and
    draw the same programs as this process (tests/property_campaigns.py leaves out what depends on the modules
    a process loaded)."""
    argv = ["property", "campaign", "properties", "--examples", "12", "--seed", "4"]
    here = serq(*argv, "--report", str(tmp_path / "here.json"))
    there = serq(*argv, "--report", str(tmp_path / "there.json"), "--ray", head)
    assert here.returncode == there.returncode == 0, there.stderr[-2000:]
    assert here.stdout == there.stdout and "12 cases, 0 failed" in here.stdout
    assert (tmp_path / "here.json").read_bytes() == (tmp_path / "there.json").read_bytes()


def test_a_dead_ray_worker_is_named_and_its_cases_run_again(head, tmp_path):
    script = (
        "import functools, sys\n"
        "from semantics.workers import run_cases\n"
        "import test_workers\n"
        f"task = functools.partial(test_workers.die_on, {str(tmp_path)!r}, {{5: 1}})\n"
        f"print(list(run_cases(task, list(range(12)), ray={head!r}, note=lambda line: print(line, file=sys.stderr))))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str([-x for x in range(12)])
    assert "a Ray worker died running case 5" in done.stderr and "sent again" in done.stderr
