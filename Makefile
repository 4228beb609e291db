# sandlot: the two README commands are `make run` and `make test`.
GO      ?= go
BIN     := $(CURDIR)/bin
DATA    ?= $(CURDIR)/.sandlot
# make run ADDR=HOST:PORT listens there (default 127.0.0.1:7423, or $$SANDLOT_ADDR); the CLI then
# needs SANDLOT_URL=http://HOST:PORT.
ADDR    ?=
PGURL   ?= postgres://sandlot:sandlot@127.0.0.1:5432/sandlot_test?sslmode=disable
# The version `sandlot --version` prints; a build outside git falls back to Go's build info.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
# The release's time (the commit's): the SBOMs' and the package files' dates.
EPOCH   ?= $(shell git log -1 --format=%ct 2>/dev/null)
DIST    ?= $(CURDIR)/dist
# Expanded once: dist and deb of one make run name the same commit even if HEAD moves meanwhile.
VERSION := $(VERSION)
COMMIT  := $(COMMIT)
EPOCH   := $(EPOCH)
# The release tooling is a module of its own (nfpm stays out of sandlot's).
RELEASE := cd release && $(GO) run ./cmd/sandlot-release
TESTFLAGS ?= -count=1 -timeout 40m
# Nested modules holding test-only dependencies (not in sandlot's module graph).
TESTMODS := guard/oracle deploy/helm/test release e2e/console

# make images: the image store the Debian bases are built into (make run's), and where to push.
IMAGE_STORE ?= $(DATA)/images
REGISTRY ?=

.PHONY: run test test-e2b-python build dist deb images deps test-deps bench bench-deps benchmarks vet fmt clean k8s-up k8s-down

## run: install what is missing, build, and start the server on its embedded default (SQLite, loopback; ADDR=HOST:PORT, DATA=DIR)
run: deps build
	$(BIN)/sandlot serve --data-dir $(DATA)$(if $(ADDR), --addr $(ADDR))

## test: install what the tests need (runtime, Postgres, npm packages), build, and run every test (the nested test modules too)
test: test-deps build
	SANDLOT_AGENT_BIN=$(BIN)/sandlot-agent SANDLOT_POD_AGENT_BIN=$(BIN)/sandlot-pod-agent SANDLOT_BIN=$(BIN)/sandlot SANDLOT_TEST_POSTGRES='$(PGURL)' \
		$(GO) test $(TESTFLAGS) ./...
	for m in $(TESTMODS); do (cd $$m && SANDLOT_AGENT_BIN=$(BIN)/sandlot-agent SANDLOT_POD_AGENT_BIN=$(BIN)/sandlot-pod-agent SANDLOT_BIN=$(BIN)/sandlot \
		$(GO) test $(TESTFLAGS) ./...) || exit 1; done

## test-e2b-python: the official E2B Python SDKs against sandlot serve (e2e/e2b/python); needs scripts/e2b-python.sh's install from the SDKs' source, which no registry these machines reach serves, so make test leaves it out
test-e2b-python: test-deps build
	SANDLOT_AGENT_BIN=$(BIN)/sandlot-agent SANDLOT_BIN=$(BIN)/sandlot \
		$(GO) test $(TESTFLAGS) -tags pythonsdk ./e2e/e2b/python/

## build: build bin/sandlot, the static bin/sandlot-agent (local sandboxes) and the static bin/sandlot-pod-agent (pod images)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/sandlot-agent ./cmd/sandlot-agent
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/sandlot-pod-agent ./cmd/sandlot-pod-agent
	$(GO) build -ldflags='-X github.com/sandlot/sandlot/internal/version.version=$(VERSION) -X github.com/sandlot/sandlot/internal/version.commit=$(COMMIT)' -o $(BIN)/sandlot ./cmd/sandlot

## dist: cross-build static sandlot, sandlot-agent and sandlot-pod-agent for linux/amd64 and linux/arm64 into dist/, reproducibly, with SHA256SUMS and an SPDX SBOM per binary (VERSION, COMMIT, EPOCH from git)
dist:
	rm -rf $(DIST)
	$(RELEASE) dist -src $(CURDIR) -out $(DIST) -version $(VERSION) -commit $(COMMIT) -epoch $(EPOCH)

## deb: make dist, then the Debian packages dist/sandlot_VERSION_ARCH.deb (docs/install.md)
deb: dist
	$(RELEASE) deb -dist $(DIST) -version $(VERSION) -epoch $(EPOCH) \
		-doc copyright=$(CURDIR)/LICENSE -doc changelog=$(CURDIR)/CHANGELOG.md -doc install.md=$(CURDIR)/docs/install.md

## images: build the daemon image and the default template's pod image as OCI layouts in bin/images/, without Docker (root and mmdebstrap: the Debian bases are built into IMAGE_STORE once); REGISTRY=HOST:PORT[/PREFIX] also pushes them (docker config credentials)
images: build
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w -X github.com/sandlot/sandlot/internal/version.version=$(VERSION) -X github.com/sandlot/sandlot/internal/version.commit=$(COMMIT)' -o $(BIN)/images/sandlot ./cmd/sandlot
	$(GO) run ./internal/cmd/images -store $(IMAGE_STORE) -out $(BIN)/images -sandlot $(BIN)/images/sandlot \
		-agent $(BIN)/sandlot-agent -pod-agent $(BIN)/sandlot-pod-agent -version $(or $(VERSION),dev)$(if $(REGISTRY), -registry $(REGISTRY))

## bench: run the benchmark suite on the real runtime and print a table (installs the Jupyter and bwrap peers)
bench: bench-deps build
	$(BIN)/sandlot bench

## benchmarks: run the suite and regenerate BENCHMARKS.md from its JSON (keeps the file's Notes section; the kubernetes group runs with KUBECONFIG and KUBE_REGISTRY=HOST:PORT, as make k8s-up prints; REPEAT=N, N odd, runs the suite N times and takes each case's rows from its median run, sandlot bench --repeat)
benchmarks: bench-deps build
	$(BIN)/sandlot bench --json$(if $(REPEAT), --repeat $(REPEAT))$(if $(KUBE_REGISTRY), --kube-registry $(KUBE_REGISTRY)) > $(BIN)/bench.json
	$(BIN)/sandlot bench --markdown BENCHMARKS.md < $(BIN)/bench.json

## k8s-up: start the single-node test cluster (internal/kubetest) in the background, install sandlot on it with the Helm chart (make images; two replicas, a Postgres of its own) and print `export KUBECONFIG=...`, `export SANDLOT_URL=... SANDLOT_API_KEY=...` and the E2B variables (builds the cluster's binaries once, scripts/k8s.sh; IMAGE_STORE=/var/cache/sandlot-test/images reuses the tests' Debian bases)
k8s-up: images
	scripts/k8s.sh build
	$(GO) build -o $(BIN)/kubeup ./internal/kubetest/kubeup
	$(BIN)/kubeup start -images $(BIN)/images -sandlot $(BIN)/sandlot

## k8s-down: stop the cluster k8s-up started (sandlot, its Postgres and the cluster) and remove everything it made
k8s-down:
	$(GO) build -o $(BIN)/kubeup ./internal/kubetest/kubeup
	$(BIN)/kubeup stop

bench-deps:
	scripts/deps.sh bench

deps:
	scripts/deps.sh run

test-deps:
	scripts/deps.sh test

## vet: go vet and gofmt check
vet:
	$(GO) vet ./...
	for m in $(TESTMODS); do (cd $$m && $(GO) vet ./...) || exit 1; done
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)

clean:
	rm -rf $(BIN) $(DIST)
