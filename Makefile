# Ariane developer entry points. Only Python 3.11+, Java 17 and make are assumed.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck unit run clean protos chromium fuse

# The install compiles src/ariane/_speedups.c when a C compiler is present (hatch_build.py);
# without one the pure-Python twins run. The last line says which build this venv has.
$(STAMP): pyproject.toml hatch_build.py src/ariane/_speedups.c src/ariane/_speedups_frame.h \
		src/ariane/_speedups_trace.h src/ariane/_speedups_tracehook.h src/ariane/_speedups_tracepack.h src/ariane/_speedups_acl.h src/ariane/_speedups_aclsig.h \
		src/ariane/_speedups_columns.h src/ariane/_speedups_dispatch.h \
		src/ariane/_speedups_batchput.h src/ariane/_speedups_sink.h \
		src/ariane/_speedups_index.h src/ariane/_speedups_put.h src/ariane/_speedups_putlog.h src/ariane/_speedups_storeput.h \
		src/ariane/_speedups_batchenc.h \
		src/ariane/_speedups_crc.h src/ariane/_speedups_header.h \
		src/ariane/_speedups_int64rows.h src/ariane/_speedups_cqgroups.h src/ariane/_speedups_records.h \
		src/ariane/_speedups_client.h src/ariane/_speedups_sendrun.h \
		src/ariane/_speedups_sendscan.h src/ariane/_speedups_sendraw.h
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark,dashboard]'
	@$(BIN)/python -c "from ariane.common import native; print('ariane build:', native.build_name())"
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

# the suite on the build this venv has, then the tests of the modules with a compiled twin
# (properties, batch and record codecs, the store's put paths, the ACL signature and its OpenSSL HMAC, the Java
# string hash, the JSON frame decoder, the consume trace records, the record-to-columns decoder of Spark reads,
# SEND_BATCH bodies put straight into the CommitLog, the Spark sink's batch entries, a batch's IndexFile keys,
# a single send's frame head and its SendResult, a read's single sends prepared and answered,
# a bulk pull's runs joined)
# again on the pure-Python twins (ARIANE_PURE=1); test_native_identity compares both builds' output.
PURE_TESTS := tests/unit/common/test_properties.py tests/unit/common/test_batch.py \
	tests/unit/common/test_record.py tests/unit/store/test_put_paths.py \
	tests/unit/common/test_native_identity.py tests/unit/acl/test_credentials.py \
	tests/unit/acl/test_signing_key.py tests/unit/acl/test_fast_check.py \
	tests/unit/common/test_hashing.py tests/unit/store/test_cq_groups.py \
	tests/unit/remoting/test_frame_native.py tests/unit/remoting/test_frames_native.py \
	tests/unit/remoting/test_header_native.py \
	tests/unit/client/test_trace_records.py tests/unit/client/test_trace_unit.py \
	tests/unit/client/test_trace_before.py tests/unit/client/test_trace_hook.py \
	tests/unit/client/test_trace_pack.py tests/unit/client/test_trace_hook_reads.py \
	tests/unit/client/test_trace_capture.py \
	tests/unit/common/test_record_columns.py tests/unit/spark/test_columns.py \
	tests/unit/store/test_record_dispatch.py tests/unit/store/test_batch_put.py \
	tests/unit/broker/test_batch_bulk.py tests/unit/spark/test_sink_entries.py \
	tests/unit/store/test_index_put.py tests/unit/store/test_int64_rows.py \
	tests/unit/store/test_put_direct.py \
	tests/unit/common/test_records_native.py tests/unit/store/test_put_log.py \
	tests/unit/client/test_send_wire.py tests/unit/client/test_send_frame.py \
	tests/unit/client/test_send_result.py tests/unit/broker/test_send_run_native.py \
	tests/unit/store/test_read_run.py tests/unit/remoting/test_sendscan.py \
	tests/unit/broker/test_send_raw.py tests/unit/broker/test_send_run.py

test: lint typecheck chromium fuse
	$(BIN)/pytest -n 2 --dist loadgroup --durations=20
	ARIANE_PURE=1 $(BIN)/pytest -n 2 -q $(PURE_TESTS)

# Debian's Chromium for the dashboard's browser tests (issue 17); when apt cannot reach its
# registry the browser tests skip and say why
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
	  || echo "chromium could not be installed: the dashboard's browser tests will skip"; }

# libfuse3 for the store's power-loss tests through FUSE (issue 12); without it they skip
fuse:
	@ldconfig -p 2>/dev/null | grep -q libfuse3 || { \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3) >/dev/null 2>&1 \
	  || echo "fuse3 could not be installed: the FUSE power-loss tests will skip"; }

unit: $(STAMP)
	$(BIN)/pytest tests/unit

run: $(STAMP)
	$(BIN)/ariane standalone

# gRPC 5.x protocol (issue 16): regenerate the committed Python modules from the .proto files
PROTO_DIR := src/ariane/proxy/v2
protos: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m grpc_tools.protoc -I src --python_out=src --mypy_out=src \
		--grpc_python_out=src --mypy_grpc_out=src $(PROTO_DIR)/definition.proto \
		$(PROTO_DIR)/service.proto $(PROTO_DIR)/admin.proto

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
