# deb.mk - make deb: the Debian package (included by the Makefile).
#
#   make deb      build/mayfly_<version>_<arch>.deb
#
# The packaging lives in ops/debian/ (the top-level layout is fixed); make
# deb copies the tree, less build/ and .git, to build/deb/mayfly-<version>
# with ops/debian as its debian/, and runs dpkg-buildpackage there (the
# Debian tools want debian/ at the top).  The package installs what "make
# install" installs, under /usr.  Needs debhelper and dpkg-dev
# (ops/install-deps.sh test installs them).

DEB_VERSION := $(shell sed -n 's/^\#define VERSION *"\(.*\)"/\1/p' master/main.c)
DEB_ARCH     = $(shell dpkg --print-architecture)
DEB_SRC     := build/deb/mayfly-$(DEB_VERSION)

.PHONY: deb
deb:
	@v=$$(dpkg-parsechangelog -l ops/debian/changelog -S Version); \
	if [ "$$v" != "$(DEB_VERSION)" ]; then \
		echo "deb: ops/debian/changelog is at $$v, master/main.c at $(DEB_VERSION)" >&2; \
		exit 1; \
	fi
	rm -rf build/deb
	mkdir -p $(DEB_SRC)
	tar -cf - --exclude=./build --exclude=./.git . | tar -xf - -C $(DEB_SRC)
	rm -rf $(DEB_SRC)/debian
	cp -a ops/debian $(DEB_SRC)/debian
	cd $(DEB_SRC) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		dpkg-buildpackage -us -uc -b
	mv build/deb/mayfly_$(DEB_VERSION)_$(DEB_ARCH).deb build/
	@echo "deb: build/mayfly_$(DEB_VERSION)_$(DEB_ARCH).deb"
