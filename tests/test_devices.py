"""Device specs: every builtin file loads with sources, and real trace devices match the right spec."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from tracekit.cost import devices
from tracekit.cost.devices import (
    DeviceSpec, builtin_specs, load_spec, match_device, resolve_spec, spec_by_id,
)
from tracekit.errors import TracekitError

from conftest import PEERS, ROOT
REQUIRED_IDS = {
    "v100", "a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "l4",
    "l40s", "rtx3090", "rtx4090", "rtx5090", "mi250x", "mi250", "mi210", "mi300x", "mi325x",
    "apple-m5-pro", "cpu", "h200-measured",
}
# device name in the peer traces -> expected spec id (None: must match nothing)
EXPECTED = {
    "NVIDIA A100-PG509-200": "a100-sxm-40gb",
    "NVIDIA A100-SXM4-80GB": "a100-sxm-80gb",
    "Tesla V100-SXM2-16GB": "v100",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA B200": "b200",
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI300X VF": "mi300x",
    "AMD Instinct MI210": "mi210",
    "AMD Radeon Graphics": "mi250",
    "ARTEMIS": None,
}


def _peer_device_props() -> list[dict]:
    props = []
    for path in sorted(PEERS.glob("*/*.json.gz")):
        doc = orjson.loads(gzip.open(path).read())
        if isinstance(doc, dict):
            props.extend(doc.get("deviceProperties") or [])
    return props


def test_every_builtin_spec_loads_with_sources():
    specs = builtin_specs()
    assert {s.id for s in specs} >= REQUIRED_IDS
    assert len({s.id for s in specs}) == len(specs)
    for spec in specs:
        assert Path(spec.path).stem == spec.id
        assert spec.vendor in devices.VENDORS
        numbers = {f"peak.{k}": v for k, v in spec.peak_tflops.items()}
        if spec.bandwidth_gbs is not None:
            numbers["memory.bandwidth_gbs"] = spec.bandwidth_gbs
        if spec.l2_bytes is not None:
            numbers["memory.l2_bytes"] = spec.l2_bytes
        if spec.launch_us is not None:
            numbers["launch.kernel_us"] = spec.launch_us
        if spec.l2_gbs is not None:
            numbers["memory.l2_gbs"] = spec.l2_gbs
        numbers.update({f"link.{k}": v for k, v in spec.links.items()})
        assert numbers, spec.id
        assert set(numbers) == set(spec.sources), spec.id
        for key, value in numbers.items():
            assert value > 0 and spec.sources[key].strip(), (spec.id, key)
        assert spec.bandwidth_gbs is not None, spec.id


def test_builtin_values_that_others_rely_on():
    h200 = spec_by_id("h200")
    assert h200.peak("bf16") == 989.5 and h200.bandwidth_gbs == 4800 and h200.l2_bytes == 62914560
    measured = spec_by_id("h200-measured")
    assert (measured.peak("bf16"), measured.peak("fp32"), measured.bandwidth_gbs) == (790, 50.7, 4200)
    assert spec_by_id("apple-m5-pro").peak("bf16") == 31.5
    assert spec_by_id("a100-sxm-40gb").bandwidth_gbs == 1555
    assert spec_by_id("a100-sxm-80gb").bandwidth_gbs == 2039
    # MI250/MI250X specs are per GCD: half the package's 362.1 / 383.0 TFLOP/s
    assert spec_by_id("mi250").peak("fp16") == pytest.approx(362.1 / 2)
    assert spec_by_id("mi250x").peak("bf16") == pytest.approx(383.0 / 2)


def test_match_device_on_real_peer_traces():
    """The committed peer traces (tests/data/peers): was a skip when an absolute path outside the repo
    was missing, so a fresh clone never ran it."""
    props = _peer_device_props()
    assert len(props) >= len(EXPECTED)
    seen = {p.get("name") for p in props}
    assert seen == set(EXPECTED), seen  # every real device name in the corpus is covered
    for entry in props:
        spec = match_device(entry)
        got = None if spec is None else spec.id
        assert got == EXPECTED[entry["name"]], (entry["name"], got)


def _props(name, **extra):
    return {"name": name, **extra}


@pytest.mark.parametrize("props, expected", [
    (_props("NVIDIA H200"), "h200"),
    (_props("NVIDIA H200 NVL"), None),
    (_props("NVIDIA H100 PCIe"), "h100-pcie"),
    (_props("NVIDIA H100 NVL"), None),
    (_props("NVIDIA GB200"), None),
    (_props("NVIDIA L4"), "l4"),
    (_props("NVIDIA L40S"), "l40s"),
    (_props("NVIDIA L40"), None),
    (_props("NVIDIA GeForce RTX 4090"), "rtx4090"),
    (_props("NVIDIA GeForce RTX 4090 D"), None),
    (_props("NVIDIA GeForce RTX 3090 Ti"), None),
    (_props("NVIDIA GeForce RTX 5090"), "rtx5090"),
    (_props("AMD Instinct MI325X"), "mi325x"),
    (_props("Apple M5 Pro"), "apple-m5-pro"),
    (_props("AMD Instinct MI250X", numSms=110, computeMajor=9, computeMinor=0), "mi250x"),
    (_props("AMD Radeon Graphics", numSms=110, computeMajor=9, computeMinor=0), "mi250x"),
    (_props("AMD Instinct MI250X / MI250", numSms=104, computeMajor=9, computeMinor=0), "mi250"),
    (_props("AMD Radeon Graphics", numSms=12, computeMajor=11, computeMinor=0), None),  # an APU
    (_props("AMD Radeon Graphics"), None),  # no CU count: refuse to guess
    (_props("NVIDIA A100-SXM4-40GB"), None),  # memory size needed to tell 40GB from 80GB
    (_props("NVIDIA A100-SXM4-40GB", totalGlobalMem=42_505_273_344), "a100-sxm-40gb"),
    (_props("NVIDIA A100 80GB PCIe", totalGlobalMem=85e9), None),
    (_props(""), None),
    ({"totalGlobalMem": 1}, None),
])
def test_match_device_names(props, expected):
    spec = match_device(props)
    assert (None if spec is None else spec.id) == expected


def test_geforce_fp32_accumulate_is_half_rate():
    for spec_id in ("rtx3090", "rtx4090", "rtx5090"):
        spec = spec_by_id(spec_id)
        assert spec.peak("bf16") == pytest.approx(spec.peak("fp16_fp16acc") / 2, rel=1e-3), spec_id
        assert spec.peak("fp16") == spec.peak("bf16")
    assert spec_by_id("rtx4090").peak("bf16") == 165.2
    assert spec_by_id("rtx4090").peak("fp16_fp16acc") == 330.3


def test_peak_aliases_and_fallbacks():
    h100 = spec_by_id("h100-sxm")
    assert h100.peak("bfloat16") == h100.peak("bf16") == h100.peak("torch.bfloat16") == 989.5
    assert h100.peak("float32") == h100.peak("fp32") == 67.0
    assert h100.peak("half") == h100.peak("float16") == 989.5
    assert h100.peak("double") == h100.peak("float64") == 34.0
    assert h100.peak("e4m3") == h100.peak("e5m2") == h100.peak("float8_e4m3fn") == 1979.0
    assert h100.peak("fp16_fp16acc") == 989.5  # datacenter: falls back to the one fp16 rate
    assert h100.peak("complex64") is None
    assert spec_by_id("v100").peak("bf16") is None  # Volta has no bf16 path


def test_matmul_and_vector_peaks():
    h100 = spec_by_id("h100-sxm")
    assert h100.matmul_peak("fp64") == 67.0 and h100.vector_peak("fp64") == 34.0
    assert h100.matmul_peak("fp32") == 67.0  # no tf32 unless asked
    assert h100.matmul_peak("tf32") == 494.5
    assert h100.matmul_peak("bf16") == 989.5 and h100.vector_peak("bf16") == 67.0
    mi250x = spec_by_id("mi250x")
    assert mi250x.matmul_peak("float32") == 47.85 and mi250x.vector_peak("float32") == 23.95
    assert spec_by_id("apple-m5-pro").vector_peak("bf16") is None


GOOD = """
id = "my-box"
name = "My box"
vendor = "nvidia"
[peak]
bf16 = { value = 700, source = "measured by me" }
[memory]
bandwidth_gbs = { value = 3000, source = "measured by me" }
"""


def test_user_spec_file_and_resolve(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    spec = load_spec(path)
    assert isinstance(spec, DeviceSpec)
    assert (spec.id, spec.peak("bf16"), spec.bandwidth_gbs, spec.l2_bytes) == ("my-box", 700, 3000, None)
    assert spec.sources["peak.bf16"] == "measured by me" and spec.match == ()
    assert resolve_spec(str(path)).id == "my-box"
    assert resolve_spec("h200").id == "h200"


@pytest.mark.parametrize("text, needle", [
    ("id = [", "not valid TOML"),
    (GOOD.replace('id = "my-box"\n', ""), "'id'"),
    (GOOD.replace('"measured by me" }\n[memory]', '"" }\n[memory]'), "source"),
    (GOOD.replace("bf16 = {", "bf61 = {"), "unknown [peak] key 'bf61'"),
    (GOOD.replace("value = 700", "value = -1"), "positive"),
    (GOOD.replace("bf16 = { value = 700, source = \"measured by me\" }", "bf16 = 700"), "bf16"),
    (GOOD.replace('vendor = "nvidia"', 'vendor = "nvdia"'), "vendor"),
    (GOOD.replace('vendor = "nvidia"', 'vendor = "nvidia"\nmatch = ["("]'), "regex"),
    (GOOD.replace('vendor = "nvidia"', 'vendor = "nvidia"\npeek = 1'), "unknown key"),
])
def test_bad_spec_file_raises_one_line_error(tmp_path, text, needle):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(TracekitError) as err:
        load_spec(path)
    message = str(err.value)
    assert needle in message and str(path) in message and "\n" not in message


def test_missing_file_and_unknown_id(tmp_path):
    with pytest.raises(TracekitError, match="cannot read"):
        load_spec(tmp_path / "nope.toml")
    with pytest.raises(TracekitError, match=r"unknown device spec 'h300'.*h200"):
        spec_by_id("h300")


def test_spec_argument_takes_a_file_or_a_builtin_id(tmp_path, monkeypatch):
    """`--spec h200-measured` (documented in docs/devices.md) used to fail with "cannot read spec file"."""
    by_id = load_spec("h200-measured")
    by_file = load_spec(str(ROOT / "tracekit" / "specs" / "h200-measured.toml"))
    assert by_id.id == by_file.id == "h200-measured"
    assert (by_id.peak("bf16"), by_id.bandwidth_gbs) == (by_file.peak("bf16"), by_file.bandwidth_gbs) == (790, 4200)
    with pytest.raises(TracekitError) as err:
        load_spec("h300-measured")
    assert "no builtin spec has that id" in str(err.value) and "h200-measured" in str(err.value)
    with pytest.raises(TracekitError, match="cannot read spec file"):
        load_spec("missing/h200-measured")              # a path, never an id
    monkeypatch.chdir(tmp_path)                          # a file of that name is the file
    (tmp_path / "h200").write_text(GOOD)
    assert load_spec("h200").id == "my-box" and resolve_spec("h200").id == "my-box"


def test_docs_table_lists_every_builtin_with_its_numbers():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "devices.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line for line in doc.splitlines()
            if line.startswith("| `")}
    fmt = lambda v: "—" if v is None else f"{v:g}"  # noqa: E731
    for spec in builtin_specs():
        cells = [c.strip() for c in rows[spec.id].split("|")[3:6]]
        assert cells == [fmt(spec.peak("bf16")), fmt(spec.peak("fp32")), fmt(spec.bandwidth_gbs)]
