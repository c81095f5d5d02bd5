"""`gputui vram-check` / `gputui burn` end to end: missing libraries, no GPU, NVML mapping, JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import uuid
from typing import Any

import pytest

from gputui.cli import main, node_flags
from gputui.cli.typed import take
from gputui.node import commands, runtimes
from gputui.node.backends import DeviceInfo
from gputui.node.cuda import CupyRuntime
from gputui.node.hostmem import NumpyRuntime
from tests.fakes.fake_nvml import RTX_4090, FakeNvml
from tests.unit.test_node_burn import BURN_KEYS
from tests.unit.test_node_fakes import FakeCudaCard, FakeCupy, fake_torch
from tests.unit.test_node_vram_check import VRAM_KEYS

MIB = 1 << 20


def _no_libraries(monkeypatch: pytest.MonkeyPatch, **present: Any) -> None:
    monkeypatch.setattr(
        runtimes,
        "_import_optional",
        lambda name: (present[name], None) if name in present else (None, "absent"),
    )


@pytest.mark.parametrize("command", ["vram-check", "burn"])
def test_without_torch_or_cupy_one_line_and_exit_2(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_libraries(monkeypatch)
    assert main([command]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"gputui: {command} needs PyTorch or CuPy (pip install 'gputui[gpu]')\n"


def test_torch_without_gpu_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_libraries(monkeypatch, torch=fake_torch(devices=0))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert main(["vram-check", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "gputui: no CUDA GPU visible (torch 2.4.1 sees no CUDA device)\n"


def test_bad_flags_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["vram-check", "--fraction", "0"], ["vram-check", "--patterns", "march"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    assert "unknown pattern 'march'" in capsys.readouterr().err


def _stand_in(monkeypatch: pytest.MonkeyPatch, total: int = 4 * MIB) -> None:
    monkeypatch.setattr(runtimes, "open_runtime", lambda choice, command: NumpyRuntime(total))


def test_numpy_stand_in_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stand_in(monkeypatch)
    assert main(["vram-check", "--backend", "numpy", "--json", "--fraction", "0.5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= VRAM_KEYS
    assert doc["checked_bytes"] == 2 * MIB and doc["mismatch_count"] == 0
    assert doc["patterns"] == ["address", "walking1", "walking0", "random"]
    assert doc["name"] == "host memory (NumPy stand-in, not a GPU)"
    assert doc["bandwidth_gbps"] > 0 and doc["bandwidth_ratio"] is None


def test_numpy_stand_in_text(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stand_in(monkeypatch)
    assert main(["vram-check", "--backend", "numpy", "--patterns", "address"]) == 0
    out = capsys.readouterr().out
    assert "memory    OK: every word read back as written" in out
    assert out.rstrip().endswith("verdict   pass")


def _two_4090s() -> tuple[FakeNvml, FakeCupy]:
    """Two 24 GB cards; CUDA numbers them in the opposite order to NVML (fastest first)."""
    second = dataclasses.replace(
        RTX_4090, uuid=f"GPU-{uuid.UUID(int=2)}", pci_bus_id="00000000:02:00.0"
    )
    nvml = FakeNvml(cards=(RTX_4090, second))
    cp = FakeCupy(
        [
            FakeCudaCard(RTX_4090.name, 24564 * MIB, second.uuid, pci_bus=2),
            FakeCudaCard(RTX_4090.name, 24564 * MIB, RTX_4090.uuid, pci_bus=1),
        ],
        limit_bytes=516 * MIB,  # 4 MiB beyond the 512 MiB workspace
    )
    return nvml, cp


def _args(**kw: Any) -> commands.VramCheckOptions:
    parser = argparse.ArgumentParser()
    node_flags.add_vram_check_arguments(parser)
    args = parser.parse_args(["--fraction", "0.5", "--patterns", "address"])
    return take(commands.VramCheckOptions, args, **kw)


def test_nvml_index_is_matched_to_the_cuda_device_by_uuid() -> None:
    nvml, cp = _two_4090s()
    target = commands.open_target(
        "auto", "vram-check", 0, nvml_module=nvml, runtime=CupyRuntime(cp)
    )
    assert target.backend.device.index == 1  # NVML 0 is CUDA 1
    assert target.backend.device.uuid == RTX_4090.uuid
    assert target.name == RTX_4090.name and target.memory_total_bytes == 24564 * MIB
    assert [d.index for d in target.devices] == [0, 1]
    target.close()


def test_two_24gb_cards_sold_as_48gb(capsys: pytest.CaptureFixture[str]) -> None:
    nvml, cp = _two_4090s()
    rc = commands.run_vram_check_command(
        _args(gpu=1, expect_gb=48.0, json=True), nvml_module=nvml, runtime=CupyRuntime(cp)
    )
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpu"] == 1
    assert len(doc["devices"]) == 2
    assert "the 48 GB spans 2 devices (24.0 + 24.0 GiB)" in doc["device_note"]
    assert "checking GPU 1 only" in doc["device_note"]
    assert doc["catalog_name"] == "rtx4090-24gb"
    assert doc["checked_bytes"] == 4 * MIB
    assert nvml.init_count == 0  # NVML released


def test_gpu_index_beyond_the_machine(capsys: pytest.CaptureFixture[str]) -> None:
    nvml, cp = _two_4090s()
    rc = commands.run_vram_check_command(_args(gpu=5), nvml_module=nvml, runtime=CupyRuntime(cp))
    assert rc == 2
    assert capsys.readouterr().err == "gputui: no GPU 5: NVML lists 2\n"


def test_gpu_hidden_from_cuda(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nvml, cp = _two_4090s()
    cp.cards = cp.cards[:1]  # CUDA_VISIBLE_DEVICES hides NVML's GPU 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    rc = commands.run_vram_check_command(_args(gpu=0), nvml_module=nvml, runtime=CupyRuntime(cp))
    assert rc == 2
    assert capsys.readouterr().err == (
        f"gputui: GPU 0 ({RTX_4090.name}, {RTX_4090.uuid}) is not visible to CUDA "
        "(CUDA_VISIBLE_DEVICES='1')\n"
    )


def test_match_by_index_when_the_library_gives_no_uuid() -> None:
    ident = FakeNvml(cards=(RTX_4090,))
    devices = (DeviceInfo(0, RTX_4090.name, 24564 * MIB),)
    from gputui.telemetry.nvml import NvmlSource

    source = NvmlSource(ident)
    (identity,) = source.identities()
    source.close()
    assert commands._cuda_index(identity, devices) == 0


def test_memory_errors_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gputui.node import patterns, vram_check

    original = patterns.verify_region

    def corrupting(*args: Any, **kw: Any) -> Any:
        def flip(pattern: str, chunks: Any) -> None:
            chunks[0][3] ^= 1

        return original(*args, **(kw | {"after_write": flip}))

    monkeypatch.setattr(vram_check, "verify_region", corrupting)
    _stand_in(monkeypatch)
    assert main(["vram-check", "--backend", "numpy", "--patterns", "walking1"]) == 1
    assert "FAIL: 1 mismatching words; first at offset 12" in capsys.readouterr().out


def test_burn_json_with_fake_nvml(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    node_flags.add_burn_arguments(parser)
    args = take(
        commands.BurnOptions,
        parser.parse_args(
            ["--backend", "numpy", "--seconds", "0.2", "--interval", "0.02", "--size", "256",
             "--json"]
        ),
    )  # fmt: skip
    nvml = FakeNvml(cards=(RTX_4090,))
    assert commands.run_burn_command(args, nvml_module=nvml) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= BURN_KEYS
    assert doc["trace"] and doc["first_throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert doc["steady_sm_clock_mhz"] == 2310 and doc["max_sm_clock_mhz"] == 3120
    assert doc["steady_clock_fraction"] == round(2310 / 3120, 3)
    assert doc["max_temperature_c"] == 84.0
    assert doc["telemetry"] == "nvml"
    assert nvml.init_count == 0


def test_importing_the_node_package_loads_no_array_library() -> None:
    code = (
        "import sys, gputui.node, gputui.node.commands, gputui.node.__main__; "
        "bad = [m for m in ('torch', 'cupy', 'numpy', 'textual', 'rich') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_python_m_gputui_node_without_libraries() -> None:
    code = (
        "import sys, runpy; from gputui.node import runtimes; "
        "runtimes._import_optional = lambda name: (None, 'absent'); "
        "sys.argv = ['x', 'burn']; runpy.run_module('gputui.node', run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr == "gputui: burn needs PyTorch or CuPy (pip install 'gputui[gpu]')\n"


def test_device_that_cannot_be_opened(capsys: pytest.CaptureFixture[str]) -> None:
    nvml, cp = _two_4090s()

    def broken(index: int) -> None:
        raise RuntimeError("cudaErrorDevicesUnavailable: all CUDA-capable devices are busy")

    cp.cuda.Device = broken
    rc = commands.run_vram_check_command(_args(gpu=0), nvml_module=nvml, runtime=CupyRuntime(cp))
    assert rc == 1
    assert capsys.readouterr().err == (
        "gputui: GPU 0: CUDA device 1 cannot be opened: "
        "cudaErrorDevicesUnavailable: all CUDA-capable devices are busy\n"
    )
    assert nvml.init_count == 0
