"""scripts/detect_signatures.py: the tool that tells whether detection changed, or depends on string hashing."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import detect_signatures  # noqa: E402

pytestmark = pytest.mark.slow


def test_the_sample_has_one_signature_whatever_the_string_hashing(capsys: pytest.CaptureFixture[str]) -> None:
    sample = str(REPO / "samples" / "orders.csv")
    # When the sample's detection is signed in interpreters hashing strings differently
    status = detect_signatures.main(["--seeds", "0,1", sample])
    # Then it is the same in both, and the same as signed here
    printed = capsys.readouterr().out.split()
    assert status == 0
    assert printed[:2] == [sample, "same"]
    assert printed[2] == detect_signatures.signature(sample)
