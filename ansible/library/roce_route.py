#!/usr/bin/python
# -*- coding: utf-8 -*-
# Ansible module for roce-route: wraps `roce-route --json apply|remove`.
# MIT licensed, like roce-route itself.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: roce_route
short_description: Per-NIC policy routing on multi-NIC RDMA hosts with roce-route
description:
  - Makes a host's per-rail routing tables, source rules and ARP sysctls match a roce-route
    TOML configuration (C(roce-route apply)), or takes out everything roce-route owns
    (C(roce-route remove)).
  - Wraps the C(roce-route) binary through its JSON output (C(roce-route --json)); C(changed)
    is the tool's own C(changed).
  - Rails that are not ready (missing, down, an address in duplicate address detection) are
    left alone by the tool (its exit code 5); the module then succeeds and names each of them
    as a warning, unless O(strict=true).
  - Runs on the target host; the binary and the configuration file must be there.
version_added: "0.1.0"
author:
  - roce-route developers
options:
  config:
    description:
      - Path of the TOML configuration on the target (a file, or a directory of C(*.toml) files).
      - Required when O(state=present); ignored when O(state=absent).
    type: path
  state:
    description:
      - V(present) applies O(config) (C(roce-route apply)).
      - V(absent) removes every route and rule roce-route owns and restores the sysctls it
        changed (C(roce-route remove)).
    type: str
    choices: [present, absent]
    default: present
  netns:
    description:
      - Run inside this named network namespace (C(roce-route --netns), like C(ip -n)).
    type: str
  state_dir:
    description:
      - The directory of roce-route's journals and record (C(roce-route --state-dir));
        the tool's default is C(/run/roce-route).
    type: path
  adopt:
    description:
      - Take over conflicting entries roce-route does not own (C(apply --adopt)).
      - Only with O(state=present).
    type: bool
    default: false
  strict:
    description:
      - All or nothing (C(apply --strict)); when a rail or address is not ready, nothing is
        changed and the task fails with the tool's exit code 1.
      - Only with O(state=present).
    type: bool
    default: false
  install:
    description:
      - Put O(config) (one file) into this directory once its change is in place
        (C(apply --install)), e.g. C(/etc/roce-route/), the directory the boot unit applies.
      - The run applies the file together with the directory's other C(*.toml) files, as the
        boot unit will; a run that fails, or check mode, leaves the directory as it was.
      - Only with O(state=present).
    type: path
  binary:
    description:
      - The roce-route binary, a path or a name looked up in E(PATH) (and C(/usr/sbin),
        C(/usr/local/sbin)).
    type: path
    default: roce-route
notes:
  - Needs root (CAP_NET_ADMIN) on the target, also in check mode for O(state=absent).
  - Check mode runs the tool with C(--dry-run); it reports what would change and changes nothing.
  - Diff mode returns the iproute2/sysctl commands the run made (or would make) as the diff.
attributes:
  check_mode:
    support: full
    description: Runs C(apply --dry-run) or C(remove --dry-run).
  diff_mode:
    support: full
    description: The commands of the change, one per line.
requirements:
  - roce-route on the target host
"""

EXAMPLES = r"""
- name: Apply the rails of /etc/roce-route/rails.toml
  roce_route:
    config: /etc/roce-route/rails.toml
  become: true

- name: Apply a draft, and put it where the boot unit reads it only once it applied
  roce_route:
    config: /var/lib/roce-route/draft/rails.toml
    install: /etc/roce-route/

- name: Apply all of /etc/roce-route/, taking over a setup made by hand, all or nothing
  roce_route:
    config: /etc/roce-route/
    adopt: true
    strict: true

- name: Apply inside a network namespace with a state directory of its own
  roce_route:
    config: /srv/test/rails.toml
    netns: testbed
    state_dir: /srv/test/state
    binary: /usr/local/sbin/roce-route

- name: Take out everything roce-route made
  roce_route:
    state: absent
"""

RETURN = r"""
changed:
  description: Whether the host was changed (in check mode, whether it would be); the tool's C(changed).
  returned: always
  type: bool
  sample: true
commands:
  description: The changes as iproute2/sysctl commands (the tool's C(changes[].command)).
  returned: always
  type: list
  elements: str
  sample:
    - ip -4 route add 198.51.100.0/24 dev rail0 table 100 proto 234 scope link src 198.51.100.10
    - ip -4 rule add priority 1000 from 198.51.100.10 lookup 100 proto 234
    - sysctl -w net.ipv4.conf.rail0.arp_ignore=1
not_ready:
  description: The rails and addresses left alone because they are not ready (state=present).
  returned: always
  type: list
  elements: dict
  sample:
    - interface: rail3
      address: null
      reason: does not exist on this host (it has lo, rail0, rail1, rail2)
exit_code:
  description: The tool's exit code (0, or 5 when some rails were not ready).
  returned: always
  type: int
  sample: 0
rc:
  description: The tool's exit code, on failure (Ansible takes a non-zero C(rc) for a failure).
  returned: failed
  type: int
  sample: 2
cmd:
  description: The command line that was run.
  returned: always
  type: list
  elements: str
  sample: [roce-route, --json, apply, /etc/roce-route/rails.toml]
result:
  description: The tool's whole JSON document.
  returned: when the tool printed one
  type: dict
  sample: {"command": "apply", "ok": true, "exit_code": 0, "changed": false, "changes": []}
"""

from ansible.module_utils.basic import AnsibleModule

# module_utils/roce_route_cli.py: the collection's copy when this runs as
# roce_route.fleet.*, else the one beside the playbook (README.md, "Shared code").
if (__package__ or "").startswith("ansible_collections."):
    from ansible_collections.roce_route.fleet.plugins.module_utils import roce_route_cli as rr
else:
    from ansible.module_utils import roce_route_cli as rr


def not_ready_text(entry):
    """One not_ready entry of the tool as a sentence."""
    where = entry.get("interface") or "?"
    if entry.get("address"):
        where = "%s on %s" % (entry["address"], where)
    return "roce-route: not ready, left alone: %s: %s" % (where, entry.get("reason") or "not ready")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            config=dict(type="path"),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            adopt=dict(type="bool", default=False),
            strict=dict(type="bool", default=False),
            install=dict(type="path"),
            **rr.common_argument_spec()
        ),
        required_if=[("state", "present", ["config"])],
        supports_check_mode=True,
    )
    p = module.params

    cmd = rr.base_command(module)
    if p["state"] == "present":
        cmd.append("apply")
        if p["adopt"]:
            cmd.append("--adopt")
        if p["strict"]:
            cmd.append("--strict")
        if p["install"]:
            cmd += ["--install", p["install"]]
    else:
        cmd.append("remove")
    if module.check_mode:
        cmd.append("--dry-run")
    if p["state"] == "present":
        # After every option: a config path starting with "-" stays a path.
        cmd += ["--", p["config"]]

    rc, out, err = module.run_command(cmd, check_rc=False)
    doc = rr.tool_document(module, cmd, rc, out, err)

    commands = [c.get("command", "") for c in doc.get("changes") or [] if isinstance(c, dict)]
    not_ready = doc.get("not_ready") or []
    for entry in not_ready:
        if isinstance(entry, dict):
            module.warn(not_ready_text(entry))

    result = dict(
        changed=bool(doc.get("changed")),
        commands=commands,
        not_ready=not_ready,
        exit_code=rc,
        cmd=cmd,
        result=doc,
    )
    if module._diff:
        result["diff"] = dict(prepared="\n".join(commands) + ("\n" if commands else ""))

    # Exit 5: applied what the host is ready for, the rest named as warnings
    # (with --strict the tool itself exits 1 instead).
    if rc == 0 or (rc == 5 and p["state"] == "present" and not p["strict"]):
        module.exit_json(**result)

    rr.fail_tool_error(module, doc, rc, err, result, "roce-route failed")


if __name__ == "__main__":
    main()
