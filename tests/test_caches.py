"""fbnops.framework.caches: the CPU caches from sysfs, which the kernels' strip rule and the benchmarks read."""

from __future__ import annotations

import pytest

from fbnops.framework import caches


def test_sysfs_size_text_in_bytes():
    assert caches._bytes("48K") == 48 << 10
    assert caches._bytes("32768K") == 32 << 20
    assert caches._bytes("1M") == 1 << 20
    assert caches._bytes("512") == 512
    assert caches._bytes("") is None and caches._bytes("K") is None and caches._bytes("lots") is None


def test_this_machines_caches():
    sizes = caches.cache_sizes()
    if not sizes:
        pytest.skip("sysfs gives no CPU caches here (not Linux, or /sys/devices/system/cpu hidden)")
    assert "L1d" in sizes and all(n > 0 for n in sizes.values())
    data = [n for name, n in sizes.items() if not name.endswith("i")]
    assert data == sorted(data), sizes  # innermost first, each level at least as large as the one inside it
    assert caches.last_level_cache_bytes() == data[-1]


def test_cpuinfo_fields_are_the_first_cpus(tmp_path, monkeypatch):
    """cpuinfo_field reads the first value of a field (the first CPU's), None where there is none."""
    import builtins

    text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2\n\nprocessor\t: 1\nvendor_id\t: Other\n"
    fake = tmp_path / "cpuinfo"
    fake.write_text(text)
    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        return real_open(fake if path == "/proc/cpuinfo" else path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    assert caches.cpuinfo_field("vendor_id") == "AuthenticAMD"
    assert caches.cpuinfo_field("flags") == "fpu avx2"
    assert caches.cpuinfo_field("model name") is None
    fake.unlink()
    assert caches.cpuinfo_field("vendor_id") is None  # (no /proc/cpuinfo)
