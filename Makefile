# Every target a newcomer needs. `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint format typecheck bench score realdata realdata-stage synth deploy schemas clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade --quiet pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv with the project and dev tools

demo: $(STAMP) ## analyze the bundled sample dataset offline and print where the report is
	$(BIN)/iterate analyze samples/orders.csv --out out/demo

test: $(STAMP) ## run the whole test suite
	$(BIN)/pytest -n 2 -q

lint: $(STAMP) ## ruff + mypy
	$(BIN)/ruff check layers functions infra tests scripts
	$(BIN)/ruff format --check layers functions infra tests scripts
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format layers functions infra tests scripts
	$(BIN)/ruff check --fix layers functions infra tests scripts

bench: $(STAMP) ## 1M-row benchmark: iterate analyze vs a bare pyarrow read; sandbox overhead
	$(BIN)/python scripts/bench.py

score: $(STAMP) ## run iterate on ../shared/datasets and score flags.csv (precision, recall, F1)
	$(BIN)/python scripts/score.py

realdata-stage: $(STAMP) ## copy the real-data corpus out of installed packages into out/realdata/ (offline)
	$(BIN)/python scripts/stage_realdata.py

realdata: realdata-stage ## detection on the real-data corpus: every issue with its verdict, and the false-alarm share
	$(BIN)/python scripts/realdata_review.py

.PHONY: screenshots
screenshots: $(STAMP) ## report.html in headless Chromium at 1400 and 390 px into out/screenshots/*.png, and a check for clipped or unreadable text (PAGES="a.html b.html"; default out/demo/report.html)
	$(BIN)/python scripts/screenshots.py $(PAGES)

schemas: $(STAMP) ## export the JSON Schemas of the contracts
	$(BIN)/python -m iterate.contracts.export layers/iterate/schemas
	$(BIN)/python -m iterate.api.openapi docs/openapi.json

synth: $(STAMP) ## synthesize the CDK app into cdk.out/ (no Docker, no cdk CLI)
	$(BIN)/python infra/app.py

deploy: synth ## deploy to a real account: AWS credentials, once `npx aws-cdk@2.1148.1 bootstrap` (see infra/README.md)
	npx --yes aws-cdk@2.1148.1 deploy --app cdk.out Iterate

clean:
	rm -rf $(VENV) cdk.out out bench/data bench/out
