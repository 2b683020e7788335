"""localfleet/inventory.py: the generated inventory is data-only Python that pyinfra reads as intended."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from localfleet.inventory import GROUP, fleet_group_data, host_entry, render_inventory
from localfleet.layout import Layout
from roles import pins


def _render(tmp_path):
    hosts = [host_entry(f"ws{n}", 40000 + n, "root", tmp_path / "id", tmp_path / "kh") for n in (1, 2)]
    data = fleet_group_data(Layout(tmp_path)) | {"reports_dir": '/tmp/it\'s "quoted"'}
    return render_inventory("f1", hosts, data), hosts, data


def test_the_inventory_is_literals_only_and_holds_exactly_the_data(tmp_path):
    text, hosts, data = _render(tmp_path)
    module = ast.parse(text)
    (assign,) = [node for node in module.body if isinstance(node, ast.Assign)]
    assert assign.targets[0].id == GROUP
    assert ast.literal_eval(assign.value) == (hosts, data)  # literal_eval: nothing but data in it


def test_the_fleet_group_data_follows_the_contract(tmp_path):
    data = fleet_group_data(Layout(tmp_path))
    assert data["rocm_install"] == "skip" and data["gpu_required"] is False and data["verify_device"] == "cpu"
    assert data["torch_spec"] == "torch==2.13.0" and "stand-in" in data["torch_label"]
    assert data["bitsandbytes_version"] == pins.BITSANDBYTES_VERSION == "0.50.1"
    assert Path(data["wheelhouse"]).is_absolute()


def test_pyinfra_reads_the_generated_inventory(tmp_path):
    text, hosts, data = _render(tmp_path)
    inventory = tmp_path / "inventory.py"
    inventory.write_text(text)
    # pyinfra's own CLI loads it (debug-inventory connects to nothing) and prints each host's groups and data.
    done = subprocess.run(
        [str(Path(sys.executable).with_name("pyinfra")), str(inventory), "debug-inventory"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    out = done.stdout + done.stderr
    assert sorted(re.findall(r"^\[(ws\d)\]", out, re.M)) == ["ws1", "ws2"], out
    for name, host_data in hosts:
        block = re.search(rf"^\[{name}\] *\n--> Groups: ([^\n]*)\n--> Data:\n(\{{.*?\n\}})$", out, re.M | re.S)
        assert GROUP in block.group(1).split(", ")
        assert json.loads(block.group(2)) == data | host_data
