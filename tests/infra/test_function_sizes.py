"""Real arm64 layers: every function's unzipped code + layers fits Lambda's 250 MiB and imports with only them."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from infra_helpers import REPO

pytestmark = [pytest.mark.infra, pytest.mark.slow]

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def layers():  # type: ignore[no-untyped-def]
    from infra.measure import built_layers

    return built_layers()  # built once into .assets/ (pip cache in .assets/pip-cache), then reused


def test_every_function_fits_lambdas_unzipped_limit(layers) -> None:  # type: ignore[no-untyped-def]
    from infra.measure import LAMBDA_UNZIPPED_LIMIT, function_sizes

    # When each function's code and layers are measured as Lambda counts them
    sizes = function_sizes(layers)
    print(f"\n{'function':<15} {'layers':<32} {'code KiB':>8} {'total MiB':>9}")
    for s in sizes:
        print(
            f"{s.name:<15} {'+'.join(s.layers):<32} {s.code_bytes / 1024:>8.1f} {s.total_bytes / MiB:>9.1f}"
        )
    # Then every one is under the limit, and the data layer is really there (not a placeholder)
    assert all(s.total_bytes < LAMBDA_UNZIPPED_LIMIT for s in sizes), [s.name for s in sizes]
    assert max(s.layer_bytes for s in sizes) > 100 * MiB


def test_a_function_never_gets_two_versions_of_one_package(layers) -> None:  # type: ignore[no-untyped-def]
    from infra.constructs.functions import FUNCTION_SPECS
    from infra.measure import layer_conflicts

    conflicts = {s.name: layer_conflicts(s, layers) for s in FUNCTION_SPECS}
    assert not {k: v for k, v in conflicts.items() if v}


def test_layers_are_arm64_and_light_functions_carry_no_pandas(layers) -> None:  # type: ignore[no-untyped-def]
    from infra.constructs.functions import FUNCTION_SPECS
    from infra.measure import top_level_modules

    numpy_core = next((layers["data"].path / "python" / "numpy" / "_core").glob("_multiarray_umath.*.so"))
    assert "aarch64" in numpy_core.name and "312" in numpy_core.name
    for spec in FUNCTION_SPECS:
        shipped = set().union(*(top_level_modules(layers[n]) for n in spec.layers))
        if spec.name in {"api", "record_failure"}:  # nothing on their paths loads data or builds agents
            assert "pandas" not in shipped and "anthropic" not in shipped, spec.name
        assert "pydantic" in shipped and "iterate" in shipped, spec.name


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) not installed")
def test_trimmed_pyarrow_still_has_every_library_it_links(layers) -> None:  # type: ignore[no-untyped-def]
    # Given the trimmed pyarrow (Flight removed) in the data layer
    pyarrow = layers["data"].path / "python" / "pyarrow"
    present = {p.name for p in pyarrow.iterdir()}
    # When each extension's NEEDED entries are read
    missing = {}
    for so in pyarrow.glob("*.so*"):
        out = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
        needed = {line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line}
        lacking = {n for n in needed if n.startswith(("libarrow", "libparquet")) and n not in present}
        if lacking:
            missing[so.name] = lacking
    # Then none of the Arrow libraries they load was stripped
    assert not missing


def test_each_handler_and_its_lazy_engine_paths_import_with_only_its_layers(layers) -> None:  # type: ignore[no-untyped-def]
    from infra.constructs.functions import FUNCTION_SPECS
    from infra.measure import cold_import

    present = [s for s in FUNCTION_SPECS if (REPO / "functions" / s.name / "handler.py").is_file()]
    results = [cold_import(s, layers) for s in present]
    for r in results:
        print(f"{r.name:<15} {'ok' if r.ok else 'FAILED':<6} {r.seconds or 0:.2f}s {r.error or ''}")
    assert present and all(r.ok for r in results), [r for r in results if not r.ok]
