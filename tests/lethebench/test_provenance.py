"""lethebench.provenance.hardware: what every manifest records about the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from lethebench.provenance import SIMD_FLAGS, hardware

CPUINFO = Path("/proc/cpuinfo")


@pytest.mark.skipif(not CPUINFO.exists(), reason="needs Linux's /proc/cpuinfo")
def test_hardware_names_the_cpus_simd_flags_read_from_cpuinfo():
    first = CPUINFO.read_text().split("\n\n")[0]
    flags_line = next(line for line in first.splitlines() if line.split(":")[0].strip() in ("flags", "Features"))
    flags = set(flags_line.split(":", 1)[1].split())
    hw = hardware()
    assert hw["cpu_simd"] == [f for f in SIMD_FLAGS if f in flags]  # in SIMD_FLAGS' order, only the listed ones
    assert hw["cpu_simd"], "an x86-64 or ARM CPU has at least one of them"
    assert hw["cores"] >= 1 and hw["python"].count(".") == 2
