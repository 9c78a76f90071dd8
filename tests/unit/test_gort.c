/* The Go runtime reader (ptrace/runtimes/go/gort.h) on the goroutines
 * fixture beside this test binary (built by Debian's Go 1.19), plain and
 * stripped (-s -w: no .symtab, the globals found from runtime.forEachGRace's
 * code): every goroutine the fixture parks, in the state Go would print,
 * created where it was, and the hot goroutine's pprof labels. No trace:
 * the fixture runs on while it is read. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/runtimes/go/gort.h"
#include "ptrace/runtimes/go/parked.h"
#include "ptrace/space/gopclntab.h"
#include "ptrace/space/space.h"
#include "tests/harness.h"

/* Starts the fixture `name` (beside this binary) with args, and waits for
 * its "ready" line. Returns its pid. */
static pid_t start_fixture(const char *name, const char *const *args)
{
	char self[4096], path[4200], line[128];
	const char *argv[12] = { path };
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int p[2], k = 1;
	pid_t pid;
	FILE *f;

	ASSERT(n > 0);
	self[n] = '\0';
	*strrchr(self, '/') = '\0';
	snprintf(path, sizeof(path), "%s/fixtures/%s", self, name);
	if (access(path, X_OK))
		FAIL_AT("%s not built (make fixtures)", path);
	for (; args && *args && k < 11; args++)
		argv[k++] = *args;
	ASSERT(pipe(p) == 0);
	if ((pid = fork()) == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(p[1], 1);
		close(p[0]);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	ASSERT((f = fdopen(p[0], "r")) != NULL);
	if (!fgets(line, sizeof(line), f) || strncmp(line, "ready ", 6))
		FAIL_AT("%s did not get ready", path);
	fclose(f);
	return pid;
}

static void stop_fixture(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The name of the Go function holding pc. */
static const char *func_of(struct pt_space *as, uint64_t pc)
{
	static struct pt_goline gl[PT_GOTAB_MAX_INLINE + 1];
	int n = pt_space_go_lines(as, pc, gl, PT_GOTAB_MAX_INLINE + 1);

	return n > 0 ? gl[n - 1].name : "?";
}

static void check_fixture(const char *name)
{
	static const char *const args[] = { "-recv", "20", "-sleep", "7", "-lock", "3", NULL };
	pid_t pid = start_fixture(name, args);
	struct pt_go_g *gs = base_calloc(4096, sizeof(*gs));
	struct pt_go_label lab[8];
	struct pt_space *as;
	struct pt_go *go;
	char note[256], buf[512];
	int n, recv = 0, sleep = 0, lock = 0, hot = 0, hot_labelled = 0, user = 0, again;
	size_t torn;

	ASSERT(gs);
	ASSERT_OK(pt_space_new(&as, pid, NULL, NULL, NULL));
	ASSERT_OK(pt_space_refresh_maps(as));
	ASSERT_OK(pt_go_new(&go, as));
	if (!pt_go_detect(go, note, sizeof(note)))
		FAIL_AT("%s: not detected: %s", name, note);
	ASSERT(!strncmp(pt_go_version(go), "go1.", 4));
	ASSERT(strstr(note, pt_go_version(go)) != NULL);
	/* The last ones may be on their way to where they park (the fixture
	 * says ready once each is about to): look until all are there. */
	for (again = 0; again < 200; again++) {
		n = pt_go_goroutines(go, gs, 4096, &torn, NULL, NULL);
		ASSERT(n > 0);
		recv = sleep = lock = hot = hot_labelled = user = 0;
		for (int i = 0; i < n; i++) {
			const char *fn = func_of(as, gs[i].startpc);

			if (gs[i].system)
				continue;
			user++;
			if (!strcmp(fn, "main.receiver") && !strcmp(gs[i].state, "chan receive"))
				recv++;
			else if (!strcmp(fn, "main.sleeper") && !strcmp(gs[i].state, "sleep"))
				sleep++;
			else if (!strcmp(fn, "main.locker") && (!strcmp(gs[i].state, "semacquire") ||
								 !strcmp(gs[i].state, "sync.Mutex.Lock")))
				lock++;
			else if (!strcmp(fn, "main.hotWorker"))
				hot++, hot_labelled += gs[i].labels != 0;
		}
		/* (the hot one is not waited for by the fixture: it may not have
		 * set its labels yet on a busy machine) */
		if (recv == 20 && sleep == 7 && lock == 3 && hot_labelled == 1)
			break;
		usleep(10000);
	}
	if (recv != 20 || sleep != 7 || lock != 3 || hot != 1)
		FAIL_AT("%s: recv %d sleep %d lock %d hot %d of %d", name, recv, sleep, lock, hot, n);
	/* main (parked in http.Serve's accept), the 30, the hot one; the
	 * runtime's own are marked system. */
	ASSERT(user >= 32 && user <= 34);
	for (int i = 0; i < n; i++) {
		if (gs[i].system)
			continue;
		ASSERT(gs[i].goid > 0);
		if (!strcmp(func_of(as, gs[i].startpc), "main.receiver")) {
			/* parked: unwound from where it saved its registers, in the
			 * runtime (gopark), created by main.spawn */
			ASSERT(gs[i].pc && gs[i].sp && gs[i].pc_is_ret && !gs[i].nstid);
			ASSERT_STR_EQ(func_of(as, gs[i].gopc - 1), "main.spawn");
			ASSERT(pt_go_recheck(go, &gs[i]));
			/* one that moved (another SP, PC, id or state) does not pass */
			struct pt_go_g moved[4] = { gs[i], gs[i], gs[i], gs[i] };
			const struct pt_go_g *pm[5] = { &moved[0], &moved[1], &moved[2], &moved[3], &gs[i] };
			uint8_t ok[5];

			moved[0].sp += 8;
			moved[1].pc += 1;
			moved[2].goid += 1;
			moved[3].status ^= 1;
			for (int j = 0; j < 4; j++)
				ASSERT(!pt_go_recheck(go, &moved[j]));
			ASSERT_OK(pt_go_recheck_many(go, pm, 5, ok));
			ASSERT(!ok[0] && !ok[1] && !ok[2] && !ok[3] && ok[4]);
		}
		/* A sample on a goroutine's own stack (g in R14) carries that
		 * goroutine's labels, whichever m runs it now (the hot one's
		 * set, none for the others); a register that is no g, none. */
		struct user_regs_struct regs = { .r14 = gs[i].g, .rsp = gs[i].stack_hi - 64 };

		ASSERT_EQ(pt_go_current_labels(go, &regs), gs[i].labels);
		regs.r14 = gs[i].g + 4;
		ASSERT_EQ(pt_go_current_labels(go, &regs), 0);
		if (!strcmp(func_of(as, gs[i].startpc), "main.hotWorker")) {
			int k = pt_go_labels(go, gs[i].labels, lab, 8, buf, sizeof(buf));

			ASSERT_EQ(k, 2);
			ASSERT_STR_EQ(lab[0].key, "tier");
			ASSERT_STR_EQ(lab[0].value, "gold");
			ASSERT_STR_EQ(lab[1].key, "worker");
			ASSERT_STR_EQ(lab[1].value, "hot");
		} else {
			ASSERT_EQ(pt_go_labels(go, gs[i].labels, lab, 8, buf, sizeof(buf)), 0);
		}
	}
	pt_go_free(go);
	pt_space_free(as);
	base_free(gs);
	stop_fixture(pid);
}

TEST(go_goroutines_of_a_running_program)
{
	check_fixture("goroutines");
}

TEST(go_goroutines_of_a_stripped_program)
{
	check_fixture("goroutines-stripped");
}

/* main.pinger, parked where it waits for its next ping, into *out: one
 * read of the goroutines and their stacks. 0 if it was not parked then (it
 * runs for a moment every 10 ms, and longer on a loaded machine, where it
 * waits for a core). */
static int find_pinger(struct pt_go *go, struct pt_space *as, struct pt_go_g *gs, struct pt_go_parked *pk,
		       struct pt_go_g *out)
{
	const struct pt_go_g *batch[PT_GO_BATCH];
	size_t torn;
	int n, nb = 0;

	ASSERT((n = pt_go_goroutines(go, gs, 1024, &torn, NULL, NULL)) > 0);
	for (int i = 0; i < n && nb < PT_GO_BATCH; i++)
		if (!gs[i].system && gs[i].waiting)
			batch[nb++] = &gs[i];
	ASSERT_OK(pt_go_unwind_parked(go, as, batch, (size_t)nb, pk));
	/* started through a wrapper (go pinger(ch) has an argument) */
	for (int i = 0; i < nb; i++)
		for (int k = 0; pk->ok[i] && k < pk->n[i]; k++)
			if (!strcmp(func_of(as, pk->frames[i][k]), "main.pinger")) {
				*out = *batch[i];
				return 1;
			}
	return 0;
}

/* What the goroutines' waits (ptrace/sessions/gowaits.c) rely on: a
 * parked goroutine's stack unwound from where it parked (parked.h), a lock
 * wait told from the others by its wait reason or (Go 1.19's semacquire)
 * its frames, and a goroutine that parks again at the same place told
 * apart by its count of leaving the running state (g.trackingSeq). */
static void check_waits(const char *name)
{
	static const char *const args[] = { "-recv", "4", "-sleep", "2", "-lock", "2", "-hot=false",
					    "-churn", NULL };
	pid_t pid = start_fixture(name, args);
	struct pt_go_g *gs = base_calloc(1024, sizeof(*gs)), first;
	struct pt_go_parked *pk = base_malloc(sizeof(*pk));
	const struct pt_go_g *batch[PT_GO_BATCH];
	struct pt_space *as;
	struct pt_go *go;
	char note[256];
	int n, nb = 0, locks = 0, others = 0, changed = 0, found = 0;
	size_t torn;

	ASSERT(gs && pk);
	ASSERT_OK(pt_space_new(&as, pid, NULL, NULL, NULL));
	ASSERT_OK(pt_space_refresh_maps(as));
	ASSERT_OK(pt_go_new(&go, as));
	ASSERT(pt_go_detect(go, note, sizeof(note)));
	ASSERT((n = pt_go_goroutines(go, gs, 1024, &torn, NULL, NULL)) > 0);
	for (int i = 0; i < n && nb < PT_GO_BATCH; i++)
		if (!gs[i].system && gs[i].waiting)
			batch[nb++] = &gs[i];
	ASSERT_OK(pt_go_unwind_parked(go, as, batch, (size_t)nb, pk));
	for (int i = 0; i < nb; i++) {
		const char *start = func_of(as, batch[i]->startpc);
		int lock;

		if (!pk->ok[i])
			continue;
		lock = pt_go_is_lock_wait(go, batch[i], pk->frames[i], pk->n[i]);
		/* its stack reaches the function it started in */
		ASSERT(pk->n[i] > 1);
		if (!strcmp(start, "main.locker")) {
			int at = 0;

			while (at < pk->n[i] && strcmp(func_of(as, pk->frames[i][at]), "main.locker"))
				at++;
			ASSERT(at > 2 && at < pk->n[i]);
			ASSERT(lock);
			locks++;
		} else if (!strcmp(start, "main.receiver") || !strcmp(start, "main.sleeper")) {
			ASSERT(!lock);
			others++;
		}
	}
	ASSERT_EQ(locks, 2);
	ASSERT_EQ(others, 6);
	/* Read again (pt_go_reread, for one that moved while read), a locker
	 * that stays parked is where it was. */
	for (int i = 0; i < nb; i++)
		if (!strcmp(func_of(as, batch[i]->startpc), "main.locker")) {
			struct pt_go_g again = *batch[i];

			ASSERT_OK(pt_go_reread(go, &again));
			ASSERT_U64_EQ(again.goid, batch[i]->goid);
			ASSERT_U64_EQ(again.sp, batch[i]->sp);
			ASSERT_U64_EQ(again.pc, batch[i]->pc);
			ASSERT(again.waiting && !strcmp(again.state, batch[i]->state));
			break;
		}
	/* main.pinger parks in the same receive every 10 ms: the same SP, PC
	 * and wait reason, another trackingSeq. */
	for (int again = 0; again < 100 && !found; again++) {
		if (again)
			usleep(15000);
		found = find_pinger(go, as, gs, pk, &first);
	}
	if (!found)
		FAIL_AT("%s: main.pinger not parked in 100 reads", name);
	for (int again = 0; again < 100 && !changed; again++) {
		usleep(15000);
		ASSERT((n = pt_go_goroutines(go, gs, 1024, &torn, NULL, NULL)) > 0);
		for (int i = 0; i < n; i++)
			if (gs[i].goid == first.goid && gs[i].waiting && gs[i].sp == first.sp &&
			    gs[i].pc == first.pc && gs[i].state == first.state)
				changed = gs[i].seq != first.seq;
	}
	if (!changed)
		FAIL_AT("%s: main.pinger's trackingSeq stays %u", name, first.seq);
	pt_go_free(go);
	pt_space_free(as);
	base_free(gs);
	base_free(pk);
	stop_fixture(pid);
}

TEST(go_waits_of_a_running_program)
{
	check_waits("goroutines");
}

TEST(go_waits_of_a_stripped_program)
{
	check_waits("goroutines-stripped");
}

TEST(go_detection_of_a_program_that_is_not_go)
{
	struct pt_space *as;
	struct pt_go *go;
	char note[256];

	ASSERT_OK(pt_space_new(&as, getpid(), NULL, NULL, NULL));
	ASSERT_OK(pt_space_refresh_maps(as));
	ASSERT_OK(pt_go_new(&go, as));
	ASSERT_EQ(pt_go_detect(go, note, sizeof(note)), 0);
	ASSERT_STR_EQ(note, "");
	ASSERT_STR_EQ(pt_go_version(go), "");
	pt_go_free(go);
	pt_space_free(as);
}
