# Thin wrapper over CMake so that a newcomer needs two commands:
#   make run    build the tool only, then generate text with the built-in small model
#   make test   build, then run every test (ctest)
#   make install PREFIX=DIR   build, then install moex, libmoex (.a, .so), moex.h, moex.pc under DIR
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all configure tool run test install clean

configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

all: configure
	cmake --build $(BUILD) -j $(JOBS)

# Only the tool: no test or benchmark is built before the first token.
tool: configure
	cmake --build $(BUILD) -j $(JOBS) --target moex

run: tool
	./$(BUILD)/moex run

# ctest shows no output of a skipped test: its SKIP line (the reason) is
# printed from the log after the summary.
test: all
	cd $(BUILD) && { ctest --output-on-failure -j $(JOBS); rc=$$?; \
	  awk '/^[0-9]+\/[0-9]+ Testing: /{t=$$3} /^SKIP: /{print "skipped " t ": " substr($$0, 7)}' Testing/Temporary/LastTest.log; \
	  exit $$rc; }

install: all
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
