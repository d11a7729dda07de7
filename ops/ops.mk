# ops.mk - make install / make uninstall (included by the Makefile).
#
#   make && sudo make install          mayflyd and the mayfly client, man
#                                      pages, config, init script, systemd
#                                      unit, logrotate snippet, the client's
#                                      bash completion, the Grafana dashboard
#   make install DESTDIR=/tmp/stage    the same tree under a staging root
#   make uninstall                     removes them; keeps an edited config,
#                                      the data and the logs
#
# PREFIX (default /usr/local) places the binaries (mayflyd in sbin, the
# client in bin; MAYFLY_BIN defaults to the mayfly beside MAYFLYD_BIN), the
# man pages, the unit, the bash completion
# ($(PREFIX)/share/bash-completion/completions/mayfly) and the dashboard
# ($(PREFIX)/share/mayfly/grafana/mayfly.json);
# /etc and /var stay where init, systemd and logrotate look.  An existing
# mayfly.conf is never overwritten.  The data and log directories belong to
# the mayfly user when it exists and root installs (create it with
# "adduser --system --group --home /var/lib/mayfly mayfly"; MAYFLY_USER=
# leaves them to root).

PREFIX        ?= /usr/local
DESTDIR       ?=
SBINDIR       ?= $(PREFIX)/sbin
BINDIR        ?= $(PREFIX)/bin
MANDIR        ?= $(PREFIX)/share/man
UNITDIR       ?= $(PREFIX)/lib/systemd/system
PKGDATADIR    ?= $(PREFIX)/share/mayfly
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
SYSCONFDIR    ?= /etc
LOCALSTATEDIR ?= /var
MAYFLYD_BIN   ?= build/release/mayflyd
MAYFLY_BIN    ?= $(dir $(MAYFLYD_BIN))mayfly
MAYFLY_USER   ?= mayfly

OPS_SUBST = sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g'
OPS_CONF  = $(DESTDIR)$(SYSCONFDIR)/mayfly/mayfly.conf

.PHONY: install uninstall

install: $(MAYFLYD_BIN) $(MAYFLY_BIN)
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/mayfly \
		$(DESTDIR)$(SYSCONFDIR)/init.d $(DESTDIR)$(SYSCONFDIR)/logrotate.d \
		$(DESTDIR)$(COMPLETIONDIR) $(DESTDIR)$(PKGDATADIR)/grafana
	install -m 0755 $(MAYFLYD_BIN) $(DESTDIR)$(SBINDIR)/mayflyd
	install -m 0644 ops/mayflyd.8 $(DESTDIR)$(MANDIR)/man8/mayflyd.8
	install -m 0755 $(MAYFLY_BIN) $(DESTDIR)$(BINDIR)/mayfly
	install -m 0644 ops/mayfly.1 $(DESTDIR)$(MANDIR)/man1/mayfly.1
	$(OPS_SUBST) ops/mayflyd.init > $(DESTDIR)$(SYSCONFDIR)/init.d/mayflyd
	chmod 0755 $(DESTDIR)$(SYSCONFDIR)/init.d/mayflyd
	$(OPS_SUBST) ops/mayflyd.service > $(DESTDIR)$(UNITDIR)/mayflyd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/mayflyd.service
	install -m 0644 ops/mayfly.logrotate $(DESTDIR)$(SYSCONFDIR)/logrotate.d/mayflyd
	install -m 0644 ops/cli/mayfly.bash $(DESTDIR)$(COMPLETIONDIR)/mayfly
	install -m 0644 ops/grafana/mayfly.json $(DESTDIR)$(PKGDATADIR)/grafana/mayfly.json
	@if [ -e $(OPS_CONF) ]; then \
		echo "install: keeping $(OPS_CONF)"; \
	else \
		install -m 0644 ops/mayfly.conf $(OPS_CONF); \
	fi
	@owner=""; \
	if [ -n "$(MAYFLY_USER)" ] && [ "$$(id -u)" -eq 0 ] && \
		id "$(MAYFLY_USER)" >/dev/null 2>&1; then \
		owner="-o $(MAYFLY_USER) -g $$(id -gn $(MAYFLY_USER))"; \
	fi; \
	for d in $(DESTDIR)$(LOCALSTATEDIR)/lib/mayfly $(DESTDIR)$(LOCALSTATEDIR)/log/mayfly; do \
		echo "install -d -m 0750 $$owner $$d"; \
		install -d -m 0750 $$owner $$d || exit 1; \
	done

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/mayflyd $(DESTDIR)$(MANDIR)/man8/mayflyd.8 \
		$(DESTDIR)$(BINDIR)/mayfly $(DESTDIR)$(MANDIR)/man1/mayfly.1 \
		$(DESTDIR)$(UNITDIR)/mayflyd.service \
		$(DESTDIR)$(SYSCONFDIR)/init.d/mayflyd \
		$(DESTDIR)$(SYSCONFDIR)/logrotate.d/mayflyd \
		$(DESTDIR)$(COMPLETIONDIR)/mayfly \
		$(DESTDIR)$(PKGDATADIR)/grafana/mayfly.json
	@rmdir $(DESTDIR)$(PKGDATADIR)/grafana $(DESTDIR)$(PKGDATADIR) 2>/dev/null || true
	@if cmp -s ops/mayfly.conf $(OPS_CONF); then \
		rm -f $(OPS_CONF); \
		rmdir $(DESTDIR)$(SYSCONFDIR)/mayfly 2>/dev/null || true; \
	elif [ -e $(OPS_CONF) ]; then \
		echo "uninstall: keeping the edited $(OPS_CONF)"; \
	fi
	@for d in $(DESTDIR)$(LOCALSTATEDIR)/lib/mayfly $(DESTDIR)$(LOCALSTATEDIR)/log/mayfly; do \
		[ ! -d $$d ] || rmdir $$d 2>/dev/null || echo "uninstall: keeping $$d (not empty)"; \
	done
