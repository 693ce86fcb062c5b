"""`invoke vagrant.box`: a libvirt box built from Debian's packages, for machines that cannot
download one from Vagrant Cloud. Debian 11 (bullseye: Python 3.9.2, the `paper-py39` stack's
Python, and the distutils and virtualenv its playbook looks for), booted by direct kernel boot
(no boot loader: libvirt is given the kernel and initrd, which live beside the box), with
sshd, a `vagrant` user with passwordless sudo and Vagrant's insecure key (Vagrant replaces it
at the first boot), the host's trusted CA certificates (where TLS is inspected on the way out,
as behind many proxies, pip in a guest trusts what the host trusts), and the libraries MXNet
needs from the OS.

The box is kept under the cache, in a folder named by the hash of its recipe (this module's
RECIPE, the configuring script, the host's CA bundle and Vagrant's key), and `vagrant box
add`ed as dlbench-bullseye-<hash>: a changed recipe gives a new box, an unchanged one is not
built again. Building needs root (debootstrap).

A box may also hold framework envs (`envs`, from DLBENCH_VM_BOX_ENVS, e.g. paper-py39:mxnet):
built in the image at the host's speed, where the playbook, under QEMU's TCG, took minutes per
env and VM; provisioning then finds them complete and skips them. Their names join the
recipe's hash."""
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from contract.errors import UserError
from ..paths import cache_dir

RECIPE = {
    "suite": "bullseye",
    "packages": ["linux-image-cloud-amd64", "initramfs-tools", "openssh-server", "sudo",
                 "iproute2", "ca-certificates", "ifupdown", "isc-dhcp-client", "python3",
                 "python3-venv", "python3-pip", "python3-virtualenv", "python3-distutils",
                 "python3-lib2to3", "libgomp1", "libquadmath0", "libgfortran5", "procps"],
    "disk_gb": 12,
    # eth0 whatever the NIC's model; the root is the whole disk (no partition table)
    "cmdline": "root=/dev/vda rw console=ttyS0 net.ifnames=0",
}
# the e2fsprogs of a newer host make features bullseye's 5.10 kernel cannot mount
MKFS_FEATURES = "^orphan_file,^metadata_csum_seed"
BOX_PYTHON = "3.9"  # bullseye's: the envs built into the box are on it
ENV_ROOT = ".cache/dlbench/envs"  # under the VMs' user's home: the Vagrant inventory's env_root
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
NAME_PREFIX = "dlbench-bullseye-"

# Run inside the image (chroot) once the files below are in place.
CONFIGURE = r"""set -e
useradd -m -s /bin/bash vagrant 2>/dev/null || true
install -d -m 700 -o vagrant -g vagrant /home/vagrant/.ssh
install -m 600 -o vagrant -g vagrant /tmp/vagrant.pub /home/vagrant/.ssh/authorized_keys
update-ca-certificates >/dev/null
rm -f /etc/ssh/ssh_host_* /tmp/vagrant.pub /var/lib/dbus/machine-id
: > /etc/machine-id
ln -sf /etc/systemd/system/dlbench-hostkeys.service \
    /etc/systemd/system/multi-user.target.wants/dlbench-hostkeys.service
apt-get clean
rm -rf /var/lib/apt/lists/*
"""

FILES = {
    "etc/fstab": "/dev/vda / ext4 defaults 0 1\n",
    "etc/hostname": "dlbench\n",
    "etc/hosts": "127.0.0.1 localhost\n127.0.1.1 dlbench\n",
    "etc/network/interfaces": "auto lo\niface lo inet loopback\n\nauto eth0\n"
                              "iface eth0 inet dhcp\n",
    # dhclient's default is to ask for 60 s: in a CI run one TCG guest raised its interface
    # after 1 min with no address, and Vagrant gave up after 15 min. It asks for 300 s here.
    # The `retry` does not help at boot: a CI guest got no address in the
    # 300 s and ifup failed ("Failed to start Raise network interfaces"), so its client did not
    # go on in the background; vmwatch.py restarts such a VM while Vagrant waits
    "etc/dhcp/dhclient.conf": "# dlbench: ask for 300 s, then every 10 s (not every 5 min)\n"
                              "timeout 300;\nretry 10;\nsend host-name = gethostname();\n"
                              "request subnet-mask, broadcast-address, time-offset, routers,\n"
                              "    domain-name, domain-name-servers, domain-search, host-name,\n"
                              "    interface-mtu;\n",
    "etc/sudoers.d/vagrant": "vagrant ALL=(ALL) NOPASSWD:ALL\nDefaults:vagrant !requiretty\n",
    "etc/pip.conf": "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n",
    "etc/ssh/sshd_config.d/dlbench.conf": "UseDNS no\n",
    # every VM made from the box gets host keys of its own at its first boot
    "etc/systemd/system/dlbench-hostkeys.service":
        "[Unit]\nDescription=SSH host keys of this VM\nBefore=ssh.service\n"
        "ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key\n\n[Service]\nType=oneshot\n"
        "ExecStart=/usr/bin/ssh-keygen -A\n\n[Install]\nWantedBy=multi-user.target\n",
}


def insecure_key():
    """Vagrant's insecure public key, which ships with Vagrant itself."""
    found = sorted(Path("/usr/share/rubygems-integration/all/gems").glob("vagrant-*/keys/"
                                                                          "vagrant.pub"))
    found += sorted(Path("/opt/vagrant/embedded/gems").glob("**/keys/vagrant.pub"))
    if not found:
        raise UserError("Vagrant's insecure key (keys/vagrant.pub in Vagrant's gem) was not "
                        "found", "install Vagrant (apt-get install vagrant)")
    return found[0].read_text()


def recipe_hash(envs=()):
    digest = hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode())
    for text in (CONFIGURE, json.dumps(FILES, sort_keys=True), insecure_key()):
        digest.update(text.encode())
    if HOST_CA_BUNDLE.is_file():
        digest.update(HOST_CA_BUNDLE.read_bytes())
    if envs:  # a box without envs keeps the hash it had before boxes could hold them
        digest.update(json.dumps(list(envs), sort_keys=True).encode())
    return digest.hexdigest()[:12]


def box_dir(envs=()):
    return cache_dir() / "vagrant" / ("box-" + recipe_hash(envs))


def box_name(envs=()):
    return NAME_PREFIX + recipe_hash(envs)


def kernel_files(folder=None):
    """(kernel, initrd) beside the box: libvirt boots them directly."""
    folder = folder or box_dir()
    return folder / "vmlinuz", folder / "initrd.img"


def ensure(progress=print, envs=()):
    """The box built (if its recipe's folder lacks it) and known to Vagrant; returns
    (name, folder). envs: framework envs to build into it (stacks.box_envs)."""
    check_envs(envs)
    folder, name = box_dir(envs), box_name(envs)
    if not (folder / "dlbench.box").is_file():
        build(folder, progress, envs)
    if name not in installed_boxes():
        progress("vagrant box add %s" % name)
        run(["vagrant", "box", "add", "--force", "--name", name, str(folder / "dlbench.box")])
    return name, folder


def check_envs(envs):
    other = sorted({e["stack"] for e in envs if e["python"] != BOX_PYTHON})
    if other:
        raise UserError("the box has Python %s (Debian %s): stack %s is on another Python"
                        % (BOX_PYTHON, RECIPE["suite"], ", ".join(other)),
                        "set DLBENCH_VM_BOX_ENVS to envs of a Python %s stack "
                        "(paper-py39:<framework>), or unset it" % BOX_PYTHON)


def installed_boxes():
    out = run(["vagrant", "box", "list", "--machine-readable"])
    return {line.split(",")[3] for line in out.splitlines()
            if line.count(",") >= 3 and line.split(",")[2] == "box-name"}


def build(folder, progress=print, envs=()):
    require_tools()
    began = time.monotonic()
    work = folder.with_name(folder.name + ".building")
    shutil.rmtree(str(work), ignore_errors=True)
    root = work / "root"
    root.mkdir(parents=True)
    progress("building the VM box (Debian %s from its packages; about 2 minutes): %s"
             % (RECIPE["suite"], folder))
    run(["debootstrap", "--include=" + ",".join(RECIPE["packages"]), RECIPE["suite"],
         str(root), mirror()], timeout=1800)
    configure(root)
    install_envs(root, envs, progress)
    kernel, initrd = kernel_files(work)
    shutil.copyfile(str(newest(root / "boot", "vmlinuz-*")), str(kernel))
    shutil.copyfile(str(newest(root / "boot", "initrd.img-*")), str(initrd))
    image(root, work)
    shutil.rmtree(str(root))
    shutil.rmtree(str(folder), ignore_errors=True)
    work.rename(folder)
    progress("box built in %.0f s: %s" % (time.monotonic() - began, folder))


def require_tools():
    if os.geteuid() != 0:
        raise UserError("building the VM box needs root (debootstrap)",
                        "run it as root, or use a box from Vagrant Cloud: "
                        "DLBENCH_VM_BOX=generic/ubuntu2204 (docs/reproducing.md)")
    missing = [tool for tool in ("debootstrap", "mkfs.ext4", "qemu-img", "chroot")
               if not shutil.which(tool)]
    if missing:
        raise UserError("building the VM box needs %s" % ", ".join(missing),
                        "apt-get install debootstrap e2fsprogs qemu-utils")


def mirror():
    """The host's Debian mirror (a local mirror or proxy stays in use), else deb.debian.org."""
    for path in sorted(Path("/etc/apt").glob("sources.list.d/*.sources")):
        for line in path.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    for path in [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt").glob(
            "sources.list.d/*.list")):
        for line in path.read_text().splitlines() if path.is_file() else []:
            words = line.split()
            if words[:1] == ["deb"] and "security" not in line and "dlbench" not in path.name:
                return words[1]
    return "http://deb.debian.org/debian"


def configure(root):
    for relative, text in FILES.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (root / "tmp" / "vagrant.pub").write_text(insecure_key())
    if HOST_CA_BUNDLE.is_file():
        shutil.copyfile(str(HOST_CA_BUNDLE),
                        str(root / "usr/local/share/ca-certificates/dlbench-host.crt"))
    run(["chroot", str(root), "/bin/sh", "-c", CONFIGURE])


def install_envs(root, envs, progress):
    """Each env as the playbook builds it (framework_envs: virtualenv on the Debian-packaged
    Python, the stack's seed, then its pins), marked complete with the marker's text the
    playbook writes, so that provisioning changes nothing of it."""
    if not envs:
        return
    run(["mount", "-t", "proc", "proc", str(root / "proc")])
    try:
        for env in envs:
            target = "/home/vagrant/%s/%s" % (ENV_ROOT, env["dirname"])
            progress("  %s's %s env in the box: %s" % (env["stack"], env["framework"], target))
            pip = "%s/bin/pip install -q --no-cache-dir --disable-pip-version-check" \
                % shlex.quote(target)
            script = ["set -e", "/usr/bin/python3 -m virtualenv -q -p /usr/bin/python%s %s"
                      % (env["python"], shlex.quote(target))]
            if env["seed"]:
                script.append("%s %s" % (pip, " ".join(map(shlex.quote, env["seed"]))))
            script.append("%s %s %s" % (pip, env["pip_args"],
                                        " ".join(map(shlex.quote, env["packages"]))))
            run(["chroot", str(root), "/bin/sh", "-c", "\n".join(script)], timeout=1800)
            (root / target.lstrip("/") / ".dlbench-complete").write_text(
                "\n".join(env["packages"]) + "\n")
        run(["chroot", str(root), "chown", "-R", "vagrant:vagrant", "/home/vagrant/.cache"])
    finally:
        run(["umount", str(root / "proc")])


def newest(folder, pattern):
    found = sorted(folder.glob(pattern))
    if not found:
        raise UserError("the box's root has no %s in %s" % (pattern, folder),
                        "check that linux-image-cloud-amd64 installed (debootstrap's log)")
    return found[-1]


def image(root, work):
    """The root as an ext4 disk (no partition table: root=/dev/vda), qcow2, and the box."""
    raw = work / "disk.raw"
    run(["mkfs.ext4", "-q", "-F", "-O", MKFS_FEATURES, "-d", str(root), str(raw),
         "%dG" % RECIPE["disk_gb"]])
    run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(work / "box.img")])
    raw.unlink()
    (work / "metadata.json").write_text(json.dumps(
        {"provider": "libvirt", "format": "qcow2", "virtual_size": RECIPE["disk_gb"]}))
    (work / "Vagrantfile").write_text('Vagrant.configure("2") do |config|\nend\n')
    with tarfile.open(str(work / "dlbench.box"), "w") as tar:
        for name in ("metadata.json", "Vagrantfile", "box.img"):
            tar.add(str(work / name), arcname=name)
    (work / "box.img").unlink()  # Vagrant keeps its own copy once added


def run(command, timeout=600):
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UserError("`%s` took more than %d s" % (" ".join(command[:3]), timeout),
                        "check the network to the Debian mirror (%s)" % mirror())
    if done.returncode != 0:
        raise UserError("`%s` failed (exit %d): %s" % (" ".join(command[:4]), done.returncode,
                                                       (done.stderr or done.stdout)[-600:]),
                        "see the message; the box's recipe is in harness/clusters/vmbox.py")
    return done.stdout
