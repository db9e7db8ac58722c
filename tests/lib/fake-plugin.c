/* fake-plugin.c - the tests' one fake volume plugin (see fake-plugin.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake-plugin.h"
#include "macro.h"
#include "mount-util.h"
#include "time-util.h"

struct fake_state fake = { .lock = PTHREAD_MUTEX_INITIALIZER,
			   .cond = PTHREAD_COND_INITIALIZER,
			   .gate_open = true };

static void fake_record(const char *op, const char *path)
{
	pthread_mutex_lock(&fake.lock);
	if (fake.n < FAKE_MAX_EVENTS) {
		struct fake_event *e = &fake.events[fake.n];
		e->seq = fake.n++;
		e->ms = now_ms();
		snprintf(e->op, sizeof(e->op), "%s", op);
		snprintf(e->path, sizeof(e->path), "%s", path ? path : "");
	}
	pthread_mutex_unlock(&fake.lock);
}

static bool fake_fails(const char *path)
{
	bool fails;

	pthread_mutex_lock(&fake.lock);
	fails = path && fake.failing[0] && streq(fake.failing, path);
	pthread_mutex_unlock(&fake.lock);
	return fails;
}

void fake_set_failing(const char *path)
{
	pthread_mutex_lock(&fake.lock);
	snprintf(fake.failing, sizeof(fake.failing), "%s", path ? path : "");
	pthread_mutex_unlock(&fake.lock);
}

void fake_reset(void)
{
	pthread_mutex_lock(&fake.lock);
	fake.n = 0;
	fake.failing[0] = '\0';
	fake.delay_ms = 0;
	fake.setup_delay_ms = 0;
	fake.check_delay_ms = 0;
	fake.gate_open = true;
	pthread_cond_broadcast(&fake.cond);
	pthread_mutex_unlock(&fake.lock);
}

void fake_gate_set(bool open)
{
	pthread_mutex_lock(&fake.lock);
	fake.gate_open = open;
	pthread_cond_broadcast(&fake.cond);
	pthread_mutex_unlock(&fake.lock);
}

bool fake_gate_has_waiter(void *arg)
{
	bool r;

	pthread_mutex_lock(&fake.lock);
	r = fake.gate_waiting > 0;
	pthread_mutex_unlock(&fake.lock);
	return r;
}

unsigned fake_find(const char *op, const char *path, struct fake_event *ret, unsigned max)
{
	unsigned k = 0;

	pthread_mutex_lock(&fake.lock);
	for (unsigned i = 0; i < fake.n && k < max; i++)
		if (streq(fake.events[i].op, op) && (!path || streq(fake.events[i].path, path)))
			ret[k++] = fake.events[i];
	pthread_mutex_unlock(&fake.lock);
	return k;
}

unsigned fake_count(const char *op, const char *path)
{
	struct fake_event e[64];

	return fake_find(op, path, e, ARRAY_SIZE(e));
}

static bool fake_can_support(const struct volume_spec *spec)
{
	return streq(spec->type, "fake");
}

static int fake_validate(const struct volume_spec *spec, struct error_info *err)
{
	const char *path = volume_spec_get(spec, "path");

	if (!path || path[0] != '/')
		return err_set(err, -EINVAL, "path: must be an absolute path");
	return 0;
}

static char *fake_get_volume_name(const struct volume_spec *spec)
{
	return strdup_printf("fake:%s", volume_spec_get(spec, "path"));
}

static char *fake_bare_get_volume_name(const struct volume_spec *spec)
{
	return strdup("fake:1");
}

static bool fake_uses_device(const struct volume_spec *spec)
{
	return volume_spec_get(spec, "device") != NULL;
}

static int fake_bind(const char *source, const struct mount_target *target, bool read_only,
		     struct error_info *err)
{
	_cleanup_close_ int fd = open(source, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return err_set(err, -errno, "%s: %s", source, strerror(errno));
	return mnt_util_bind_at(fd, target->parent_fd, target->name, read_only, err);
}

static int fake_set_up_at(const struct volume_mounter *m, const struct mount_target *target,
			  struct error_info *err)
{
	const char *path = volume_spec_get(m->spec, "path");
	int r;

	unsigned delay;

	fake_record("set_up", path);
	pthread_mutex_lock(&fake.lock);
	fake.gate_waiting++;
	pthread_cond_broadcast(&fake.cond);
	while (!fake.gate_open)
		pthread_cond_wait(&fake.cond, &fake.lock);
	fake.gate_waiting--;
	delay = fake.setup_delay_ms;
	pthread_mutex_unlock(&fake.lock);
	if (delay)
		usleep(delay * 1000);
	if (fake_fails(path))
		r = err_set(err, -EIO, "injected failure");
	else
		r = fake_bind(m->device_mount_path ? m->device_mount_path : path, target,
			      m->read_only, err);
	fake_record(r < 0 ? "set_up.failed" : "set_up.done", path);
	return r;
}

static int fake_tear_down_at(const char *volume_name, const char *pod_uid, const char *target,
			     struct error_info *err)
{
	const char *path = startswith(volume_name, "fake:") ? volume_name + strlen("fake:") : "";
	unsigned delay;
	int r;

	fake_record("tear_down", path);
	pthread_mutex_lock(&fake.lock);
	delay = fake.delay_ms;
	pthread_mutex_unlock(&fake.lock);
	if (delay)
		usleep(delay * 1000);
	r = mnt_util_umount(target, 0, err);
	if (r == -EINVAL)
		r = 0;
	fake_record("tear_down.done", path);
	return r;
}

static int fake_check_set_up(const struct volume_mounter *m, const char *target,
			     struct mount_seen *seen, struct error_info *err)
{
	unsigned delay;

	fake_record("check_set_up", volume_spec_get(m->spec, "path"));
	pthread_mutex_lock(&fake.lock);
	delay = fake.check_delay_ms;
	pthread_mutex_unlock(&fake.lock);
	if (delay)
		usleep(delay * 1000);
	return mnt_util_is_mount_root(target) == 1;
}

static int fake_mount_device(const struct volume_spec *spec, const char *device_path,
			     bool read_only, const struct mount_target *target,
			     struct error_info *err)
{
	const char *path = volume_spec_get(spec, "path");
	int r;

	fake_record("mount_device", path);
	if (fake_fails(path))
		r = err_set(err, -EIO, "injected failure");
	else
		r = mnt_util_mount_at("fakedev", target->parent_fd, target->name, "tmpfs",
				      read_only ? "ro,size=1m" : "size=1m", err);
	fake_record(r < 0 ? "mount_device.failed" : "mount_device.done", path);
	return r;
}

static int fake_unmount_device(const char *path, struct error_info *err)
{
	int r;

	fake_record("unmount_device", path);
	r = mnt_util_umount(path, 0, err);
	fake_record("unmount_device.done", path);
	return r == -EINVAL ? 0 : r;
}

static int fake_detach(const struct volume_spec *spec, const struct device_attachment *att,
		       struct error_info *err)
{
	fake_record("detach", volume_spec_get(spec, "path"));
	return 0;
}

static int fake_attach(const struct volume_spec *spec, bool read_only,
		       struct device_attachment *ret, struct error_info *err)
{
	const char *path = volume_spec_get(spec, "path");

	fake_record("attach", path);
	ret->device_path = strdup(path);
	return ret->device_path ? 0 : err_set(err, -ENOMEM, "out of memory");
}

static int fake_check_health(const struct volume_spec *spec, const char *path,
			     struct error_info *err)
{
	fake_record("check_health", path);
	return 0;
}

#define FAKE_VOLUME_OPS                                                       \
	.can_support = fake_can_support, .validate = fake_validate,           \
	.get_volume_name = fake_get_volume_name, .set_up_at = fake_set_up_at, \
	.tear_down_at = fake_tear_down_at, .check_set_up = fake_check_set_up

static const struct volume_ops fake_ops = { FAKE_VOLUME_OPS };
static const struct volume_ops fake_ops_checked = { FAKE_VOLUME_OPS,
						    .check_health = fake_check_health };

static const struct device_mount_ops fake_device_ops = {
	.uses_device = fake_uses_device,
	.mount_device = fake_mount_device,
	.unmount_device = fake_unmount_device,
};

static const struct attach_ops fake_attach_ops = {
	.attach = fake_attach,
	.detach = fake_detach,
};

const struct volume_plugin fake_plugin = {
	.name = "fake",
	.ops = &fake_ops,
	.device = &fake_device_ops,
	.attach = &fake_attach_ops,
};

const struct volume_plugin fake_plugin_checked = {
	.name = "fake",
	.ops = &fake_ops_checked,
	.device = &fake_device_ops,
	.attach = &fake_attach_ops,
};

/* The bare one: only the two ops every plugin must have, for the wrappers' answers to absent
 * ops and tables. */
static const struct volume_ops fake_bare_ops = {
	.can_support = fake_can_support,
	.get_volume_name = fake_bare_get_volume_name,
};

const struct volume_plugin fake_plugin_bare = { .name = "fake", .ops = &fake_bare_ops };
