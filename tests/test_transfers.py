"""Copies between host and device, and between devices: their floor is their bytes over the link they
cross (spec [link]: pcie_gbs for host copies, the fastest link for peer copies), bound "link"."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import PEERS
from tracekit.analyze import analyze_path
from tracekit.cost.devices import spec_by_id
from tracekit.cost.roofline import _transfer_cost

ALEXNET = PEERS / "hta" / "critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"


def test_host_to_device_copies_cross_pcie():
    """HTA's AlexNet benchmark on an A100 (PCIe Gen4: 32 GB/s per direction, its datasheet's 64 GB/s
    halved): 16 pageable host-to-device copies of 244,403,360 B in all take 55.5 ms; their floor is
    244,403,360 B / 32 GB/s = 7,637.6 µs, so the copies run at 14 % of the link (pageable memory)."""
    df = analyze_path(ALEXNET)[0].kernels
    copies = df[df["name"].str.startswith("Memcpy HtoD")]
    assert len(copies) == 16 and copies["event_bytes"].sum() == 244_403_360
    assert (copies["floor_us"] == copies["event_bytes"] / 32e3).all()
    assert copies["floor_us"].sum() == pytest.approx(7_637.605)
    assert copies["covered"].all()
    # the small copies' link floors fall under the trace's shortest device activity (a100-sxm-40gb has no
    # [launch] kernel_us: cost.roofline.launch_floor): those are launch-bound, the rest link-bound
    shortest = df.loc[df["kind"].isin(("kernel", "memcpy", "memset")) & (df["dur_us"] > 0), "dur_us"].min()
    small = copies["floor_us"] < shortest
    assert small.any() and (~small).any()
    assert (copies.loc[small, "bound"] == "launch").all() and (copies.loc[~small, "bound"] == "link").all()
    assert spec_by_id("a100-sxm-40gb").transfer_gbs("pcie") == 32


@pytest.mark.parametrize("name, unit, factor", [
    ("Memcpy HtoD (Pinned -> Device)", "pcie", 1), ("Memcpy DtoH (Device -> Pageable)", "pcie", 1),
    ("Memcpy PtoP (Device -> Device)", "link", 1), ("Memcpy DtoD (Device -> Device)", "vector", 2)])
def test_each_copy_kind_crosses_its_own_link(name, unit, factor):
    """Synthetic rows: a device copy reads and writes its bytes in memory; the others move them once."""
    cost = _transfer_cost(SimpleNamespace(name=name, kind="memcpy", event_bytes=1000.0))
    assert (cost.unit, cost.bytes) == (unit, factor * 1000.0)


def test_a_spec_without_pcie_leaves_host_copies_without_a_floor():
    assert spec_by_id("b200").transfer_gbs("pcie") is None
    assert spec_by_id("b200").transfer_gbs("link") == 900
