# Every target a newcomer needs. `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps on one .venv: `make demo` installs what the command needs (the runtime dependencies), `make
# test`/`make lint` add the dev tools (AWS, CDK, moto, mypy, stubs) into the same .venv, so running both in
# either order upgrades one environment instead of building two. Installing the dev set satisfies both.
RUNTIME := $(VENV)/.installed-runtime
DEV := $(VENV)/.installed-dev

.PHONY: install demo test lint format typecheck bench bench-aws bench-admission sandbox-peak bench-large engine-equivalence timeline bench-merge bench-bound bench-versus bench-batch bench-library cost-model score calibrate crossfit corpus realdata realdata-stage synth deploy schemas clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# The venv's own pip (23.2 with Python 3.11) reads pyproject.toml and editable installs; upgrading it first
# cost a download on every fresh clone for nothing the runtime set needs.
$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	touch $(RUNTIME)

$(DEV): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(DEV) $(RUNTIME)

install: $(DEV) ## create .venv with the project and dev tools

demo: $(RUNTIME) ## analyze the bundled sample dataset offline, write the report, print the next command to try
	$(BIN)/iterate analyze samples/orders.csv --out out/demo

test: $(DEV) ## run the whole test suite
	$(BIN)/pytest -n 2 -q

lint: $(DEV) ## ruff + mypy
	$(BIN)/ruff check layers functions infra tests scripts
	$(BIN)/ruff format --check layers functions infra tests scripts
	$(BIN)/mypy

format: $(DEV)
	$(BIN)/ruff format layers functions infra tests scripts
	$(BIN)/ruff check --fix layers functions infra tests scripts

bench: $(DEV) ## 1M-row benchmark: iterate analyze vs a bare pyarrow read; sandbox overhead
	$(BIN)/python scripts/bench.py

bench-large: $(DEV) ## the engine path on a generated CSV (ROWS=50000000, ~10 GB, cached under out/bench-large) against DuckDB's SUMMARIZE of it: wall, peak memory, ratio
	$(BIN)/python scripts/bench_large.py --rows $(or $(ROWS),50000000)

engine-equivalence: $(DEV) ## the engine path against the single pass: flags per issue type and F1 on the study pairs (ARGS="FILE ..." for others)
	$(BIN)/python scripts/engine_equivalence.py $(ARGS)

bench-aws: $(DEV) ## under moto, the real state machine: a bench CSV chunked and merged (ROWS=200000); the engine path (Athena) on LARGE_ROWS=1000000 rows with its cost figures (bytes scanned, GB-s, requests); the admission load test
	$(BIN)/python scripts/aws_chunked.py --rows $(or $(ROWS),200000)
	$(BIN)/python scripts/aws_large.py --rows $(or $(LARGE_ROWS),1000000) --json out/bench-aws-large.json
	$(BIN)/python scripts/admission_load.py

bench-admission: $(DEV) ## the admission load test alone under moto: 1,000 uploads from 50 owners within a minute (ARGS="--uploads 200 ..."), runs queued, waits, invocations
	$(BIN)/python scripts/admission_load.py $(ARGS)

sandbox-peak: $(DEV) ## sandbox invocations one run holds at once, and their durations (the real state machine under moto; ARGS="--source FILE --runs N")
	$(BIN)/python scripts/sandbox_peak.py $(ARGS)

timeline: $(DEV) ## cores a whole run keeps busy, second by second, and its one-core stretches (ARGS="-- cmd ..." for another command)
	$(BIN)/python scripts/cpu_timeline.py $(ARGS)

bench-merge: $(DEV) ## MergeChunks alone in a fresh process: merge + profile step memory (SOURCE=a CSV over 64 MiB; default: the 1M bench file)
	$(BIN)/python scripts/merge_memory.py --source $(or $(SOURCE),bench/data/bench_1m.csv)

bench-bound: $(DEV) ## does a whole run finish inside a hard memory limit (a cgroup, all processes, no swap)? (ROWS=3000000 MB=2048, or SOURCE=)
	$(BIN)/python scripts/bound_run.py $(if $(SOURCE),--source $(SOURCE),--rows $(or $(ROWS),3000000)) --mb $(or $(MB),2048)

bench-versus: $(DEV) ## iterate analyze with this engine against another checkout's, alternately (BASE=../baseline; RUNS=3)
	$(BIN)/python scripts/bench_versus.py --base $(BASE) --runs $(or $(RUNS),3)

bench-batch: $(DEV) ## a batch of template proofs in one sandbox run, this checkout against another's (BASE=../baseline)
	$(BIN)/python scripts/bench_batch.py --base $(BASE)

bench-library: $(DEV) ## investigation tokens in LLM mode (fake server): first run, unchanged rerun, new rows
	$(BIN)/python scripts/bench_library.py

score: $(DEV) ## detection on the study pairs (../shared/datasets) and the check split (../shared/datasets-check, aggregates only), scored by ../shared/eval/score.py
	$(BIN)/python scripts/score.py $(ARGS)

corpus: realdata-stage ## build the training corpus into out/corpus/ (study pairs, real tables with errors from three generators, null tables)
	$(BIN)/python scripts/corpus.py

calibrate: realdata-stage ## refit the decision over the training corpus, print the leave-one-out table, write layers/iterate/detect/fitted.json
	$(BIN)/python scripts/calibrate.py --rebuild $(ARGS)

crossfit: realdata-stage ## false alarms on ../shared/realtables, each table judged by a decision fitted without it (after make calibrate)
	$(BIN)/python scripts/crossfit.py $(ARGS)

cost-model: $(DEV) ## what one run costs on AWS for 1 MB, 1 GB and 100 GB inputs, from per-chunk and per-step costs measured here
	$(BIN)/python scripts/cost_model.py

realdata-stage: $(DEV) ## copy the real-data corpus out of installed packages into out/realdata/ (offline)
	$(BIN)/python scripts/stage_realdata.py

realdata: realdata-stage ## detection on both real-data corpora (tests/realdata, ../shared/realtables): every issue with its verdict, and the false-alarm share
	$(BIN)/python scripts/realdata_review.py
	$(BIN)/python scripts/realdata_review.py --shared

.PHONY: screenshots
screenshots: $(DEV) ## report.html in headless Chromium at 1400 and 390 px into out/screenshots/*.png, and a check for clipped or unreadable text (PAGES="a.html b.html"; default out/demo/report.html)
	$(BIN)/python scripts/screenshots.py $(PAGES)

schemas: $(DEV) ## export the JSON Schemas of the contracts
	$(BIN)/python -m iterate.contracts.export layers/iterate/schemas
	$(BIN)/python -m iterate.api.openapi docs/openapi.json

synth: $(DEV) ## synthesize the CDK app into cdk.out/ (no Docker, no cdk CLI)
	$(BIN)/python infra/app.py

deploy: synth ## deploy to a real account: AWS credentials, once `npx aws-cdk@2.1148.1 bootstrap` (see infra/README.md)
	npx --yes aws-cdk@2.1148.1 deploy --app cdk.out Iterate

clean:
	rm -rf $(VENV) cdk.out out bench/data bench/out
