#!/usr/bin/python
# -*- coding: utf-8 -*-
# Ansible module for roce-route: wraps `roce-route --json probe`.
# MIT licensed, like roce-route itself.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: roce_route_probe
short_description: Probe a multi-NIC RDMA host's rails against its peers on the wire with roce-route
description:
  - With O(self_only=true), describes this host's rails (name, addresses, link-layer address,
    MTU, RDMA device:port) as C(roce-route --json probe --self) prints them, for the other
    hosts' O(peers).
  - With O(peers), probes from every rail of this host to every peer address
    (C(roce-route --json probe --peers FILE...)) and returns the tool's matrix of pairs, each
    with its problems (C(arp_none), C(arp_flux), C(wrong_source_mac), C(wrong_interface),
    C(no_reply), C(mtu), C(local_route), C(duplicate_address), C(send_failed)).
  - With O(rdma=true), also at the RDMA layer (C(probe --rdma)); every pair connects through
    the RDMA CM from the rail's own device and does an RDMA WRITE and READ against the peer's
    responder; each pair's C(rdma_probe) has the result, and its problems the RDMA kinds
    (C(rdma_unreachable), C(rdma_rejected), C(rdma_wrong_device), C(rdma_completion),
    C(rdma_mtu), C(rdma_data)), tied to the IP-level cause.
  - With O(listen=true), runs that responder (C(probe --listen)) on every rail address until
    O(idle) seconds pass without a connection. Run it with C(async) and C(poll=0) before the
    other hosts' O(rdma) probes (ansible/probe.yml does).
  - Problems found (the tool's exit code 1) are not a failure of the task; the module returns
    the matrix with RV(problems_found=true). Nor are pairs that could not be verified (exit 6,
    no problem found but some check had no evidence, each pair's C(not_verified) says why),
    with RV(not_verified_found=true). Bad input (exit 2) and every other error fail the task with
    the tool's own message.
  - Never changes the host (C(changed) is always false), so check mode runs it as well.
version_added: "0.1.0"
author:
  - roce-route developers
options:
  self_only:
    description:
      - Describe this host's rails (C(probe --self)) and probe nothing.
      - Mutually exclusive with O(peers).
    type: bool
    default: false
  same_rail:
    description:
      - Probe each peer address only from the rail named as the peer's NIC that has it
        (C(probe --same-rail)); addresses no O(peers) document describes are probed from every rail.
      - A fleet probing at once then makes each host learn one neighbour entry per rail of each
        prober, not one per pair.
    type: bool
    default: false
  rdma:
    description:
      - Also probe each pair at the RDMA layer (C(probe --rdma)), against O(listen) on the peers.
      - Needs librdmacm and libibverbs on the target (the dynamically linked roce-route).
    type: bool
    default: false
  rdma_timeout:
    description:
      - Seconds one pair may take at the RDMA layer (C(--rdma-timeout)); the tool's default is 3.
    type: float
  rdma_port:
    description:
      - The responder's port (C(--rdma-port)); the tool's default is 7472.
    type: int
  listen:
    description:
      - Be the responder of the other hosts' O(rdma) probes (C(probe --listen)), and probe nothing.
      - Mutually exclusive with O(peers), O(self_only) and O(rdma).
    type: bool
    default: false
  idle:
    description:
      - With O(listen), end after this many seconds without a new connection (C(--idle)); the
        tool's default is 60.
    type: float
  peers:
    description:
      - The peers to probe, each either the document another host's C(probe --self) printed
        (a dict, e.g. RV(self) of this module there, or the whole JSON envelope) or an IP
        address (a string).
      - Each document is written to a file of its own in a temporary directory on the target,
        the addresses to one more file; all are passed as C(--peers FILE) and deleted afterwards.
      - Required unless O(self_only=true).
    type: list
    elements: raw
  config:
    description:
      - Paths of the TOML configuration on the target (files or directories, as C(apply)
        takes), whose rails are probed.
      - Default the config of the latest apply in the network namespace (the tool's record in
        O(state_dir)).
    type: list
    elements: path
  timeout:
    description:
      - Seconds to wait for what does not answer (C(probe --timeout)); the tool's default is 0.5.
    type: float
  netns:
    description:
      - Run inside this named network namespace (C(roce-route --netns), like C(ip -n)).
    type: str
  state_dir:
    description:
      - roce-route's state directory (C(roce-route --state-dir)), where the latest apply is
        recorded; only read, when O(config) is not given.
    type: path
  binary:
    description:
      - The roce-route binary, a path or a name looked up in E(PATH) (and C(/usr/sbin),
        C(/usr/local/sbin)).
    type: path
    default: roce-route
notes:
  - Probing needs CAP_NET_RAW (root) on the target; O(self_only) needs neither.
  - A healthy pair answers at once; the timeout is waited for only by what does not answer.
attributes:
  check_mode:
    support: full
    description: The probe changes nothing, so it runs in check mode too.
  diff_mode:
    support: none
requirements:
  - roce-route (with the probe command) on the target host
seealso:
  - module: roce_route
"""

EXAMPLES = r"""
- name: Describe this host's rails for the others
  roce_route_probe:
    self_only: true
  register: rails

- name: Probe the other hosts of the play, from the documents they gave
  roce_route_probe:
    peers: "{{ ansible_play_hosts | difference([inventory_hostname])
               | map('extract', hostvars, ['rails', 'self']) | list }}"
  register: matrix

- name: Probe two bare addresses from the rails of a given config, waiting at most 1 s
  roce_route_probe:
    peers: [198.51.100.20, "2001:db8:1::20"]
    config: [/etc/roce-route/rails.toml]
    timeout: 1

- name: Start the RDMA responder in the background, for the other hosts' rdma probes
  roce_route_probe:
    listen: true
    idle: 60
  async: 900
  poll: 0

- name: Probe the other hosts at the IP and RDMA layers
  roce_route_probe:
    peers: "{{ ansible_play_hosts | difference([inventory_hostname])
               | map('extract', hostvars, ['rails', 'self']) | list }}"
    rdma: true

- name: Fail the host when some pair has a problem
  ansible.builtin.assert:
    that: not matrix.problems_found
    fail_msg: "{{ matrix.probes | selectattr('problems') | map(attribute='detail') | list }}"
"""

RETURN = r"""
changed:
  description: Always false; the probe changes nothing.
  returned: always
  type: bool
  sample: false
ok:
  description: The tool's C(ok); true when every pair is right (or, with O(self_only), when the rails were read).
  returned: always
  type: bool
  sample: true
problems_found:
  description: Whether some pair has a problem (the tool's exit code 1, no error).
  returned: always
  type: bool
  sample: false
not_verified_found:
  description: Whether some pair without a problem could not be verified (its C(not_verified) says why; the tool's exit code 6 when no pair has a problem).
  returned: always
  type: bool
  sample: false
self:
  description: This host's rails, the tool's C(self) (O(self_only=true)); what the other hosts take as O(peers).
  returned: when self_only
  type: dict
  sample:
    rails:
      - name: rail0
        addresses: [198.51.100.10/24]
        mac: "3a:74:15:c0:59:41"
        mtu: 9000
        rdma: "mlx5_0:1"
probes:
  description: One entry per pair (this host's rail, peer address), the tool's C(probes).
  returned: when peers are given
  type: list
  elements: dict
  sample:
    - rail: rail0
      source: 198.51.100.10
      peer: 198.51.100.20
      peer_rail: rail0
      problems: [arp_flux]
      fix_on: [peer]
      arp_answers: ["3a:74:15:c0:59:41", "26:b9:a6:ac:6d:3f"]
      reply_interface: rail0
      reply_source_mac: "3a:74:15:c0:59:41"
      rtt_ms: 0.015
      rail_mtu: 9000
      path_mtu: 9000
      detail: "2 link-layer addresses answered ARP for 198.51.100.20 (peer rail0) on rail0 ..."
      fixes: ["on the peer, run `roce-route apply` (a source rule and table per NIC, arp_ignore=1, arp_announce=2)"]
listening:
  description: The responder's addresses (O(listen=true)), each with C(rail), C(address), C(port) (the RDMA port the CM bound it to) and C(error).
  returned: when listen
  type: list
  elements: dict
  sample:
    - {rail: rail0, address: 198.51.100.20, port: "mlx5_0:1", error: null}
accepted:
  description: The connections the responder accepted (O(listen=true)).
  returned: when listen
  type: int
  sample: 16
refused:
  description: Why the responder refused the connections it did not accept (O(listen=true)).
  returned: when listen
  type: list
  elements: str
  sample: []
rails:
  description: This host's rails that were probed (the tool's C(rails)).
  returned: when peers are given
  type: list
  elements: str
  sample: [rail0, rail1]
exit_code:
  description: The tool's exit code (0 all right, 1 problems found, 6 some pairs not verified).
  returned: always
  type: int
  sample: 0
error:
  description: The tool's error message (also the task's C(msg)).
  returned: failed
  type: str
  sample: "--peers /tmp/peers/0.json: rail \"rail0\": \"x/24\" is not an IP address"
rc:
  description: The tool's exit code, on failure.
  returned: failed
  type: int
  sample: 2
cmd:
  description: The command line that was run.
  returned: always
  type: list
  elements: str
  sample: [roce-route, --json, probe, --peers, /tmp/ansible-roce-route-probe/0.json]
result:
  description: The tool's whole JSON document.
  returned: when the tool printed one
  type: dict
"""

import json
import os
import shutil
import sys
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six import string_types

# module_utils/roce_route_cli.py: the collection's copy when this runs as
# roce_route.fleet.*, else the one beside the playbook (README.md, "Shared code").
if (__package__ or "").startswith("ansible_collections."):
    from ansible_collections.roce_route.fleet.plugins.module_utils import roce_route_cli as rr
else:
    from ansible.module_utils import roce_route_cli as rr


def write_peers(module, tmp, peers):
    """The peers as files for --peers: one per document, one for all the addresses."""
    files = []
    addresses = []
    for n, peer in enumerate(peers):
        if isinstance(peer, dict):
            path = os.path.join(tmp, "peer-%d.json" % n)
            with open(path, "w") as f:
                json.dump(peer, f, indent=1)
            files.append(path)
        elif isinstance(peer, string_types) and peer.strip():
            addresses.append(peer.strip())
        else:
            module.fail_json(
                msg="peers[%d]: neither a probe --self document (a dict) nor an address (a string): %r" % (n, peer),
                changed=False,
            )
    if addresses:
        path = os.path.join(tmp, "addresses.txt")
        with open(path, "w") as f:
            f.write("".join(a + "\n" for a in addresses))
        files.append(path)
    return files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            self_only=dict(type="bool", default=False),
            peers=dict(type="list", elements="raw"),
            config=dict(type="list", elements="path"),
            timeout=dict(type="float"),
            rdma=dict(type="bool", default=False),
            same_rail=dict(type="bool", default=False),
            rdma_timeout=dict(type="float"),
            rdma_port=dict(type="int"),
            listen=dict(type="bool", default=False),
            idle=dict(type="float"),
            **rr.common_argument_spec()
        ),
        mutually_exclusive=[("self_only", "peers"), ("listen", "peers"), ("listen", "self_only"), ("listen", "rdma")],
        supports_check_mode=True,
    )
    p = module.params
    if not p["self_only"] and not p["listen"] and not p["peers"]:
        module.fail_json(
            msg="give peers (other hosts' self documents or addresses), self_only: true, or listen: true",
            changed=False,
        )

    cmd = rr.base_command(module)
    cmd.append("probe")
    if p["timeout"] is not None:
        cmd += ["--timeout", str(p["timeout"])]
    if p["same_rail"]:
        cmd.append("--same-rail")
    if p["rdma"]:
        cmd.append("--rdma")
    if p["rdma_timeout"] is not None:
        cmd += ["--rdma-timeout", str(p["rdma_timeout"])]
    if p["rdma_port"] is not None:
        cmd += ["--rdma-port", str(p["rdma_port"])]
    if p["listen"]:
        cmd.append("--listen")
        if p["idle"] is not None:
            cmd += ["--idle", str(p["idle"])]

    tmp = tempfile.mkdtemp(prefix="ansible-roce-route-probe-")
    try:
        if p["self_only"]:
            cmd.append("--self")
        elif not p["listen"]:
            for path in write_peers(module, tmp, p["peers"]):
                cmd += ["--peers", path]
        if p["config"]:
            # After every option: a config path starting with "-" stays a path.
            cmd += ["--"] + p["config"]
        rc, out, err = module.run_command(cmd, check_rc=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    doc = rr.tool_document(module, cmd, rc, out, err, error_key="error", ok=False, problems_found=False, exit_code=rc)

    error = doc.get("error")
    result = dict(
        changed=False,
        ok=bool(doc.get("ok")),
        problems_found=False,
        not_verified_found=False,
        exit_code=rc,
        cmd=cmd,
        result=doc,
    )
    if p["listen"]:
        result["listening"] = doc.get("listening") or []
        result["accepted"] = doc.get("accepted") or 0
        result["refused"] = doc.get("refused") or []
        # Exit 6: it listened on some of the addresses only.
        result["not_verified_found"] = rc == 6
    elif not p["self_only"]:
        result["probes"] = doc.get("probes") or []
        result["rails"] = doc.get("rails") or []
        result["problems_found"] = any(pr.get("problems") for pr in result["probes"] if isinstance(pr, dict))
        result["not_verified_found"] = any(
            pr.get("not_verified") and not pr.get("problems") for pr in result["probes"] if isinstance(pr, dict)
        )

    # The responder listened on none of the addresses (exit 1): each says why.
    if p["listen"] and rc == 1 and not error and "listening" in doc:
        why = []
        for entry in result["listening"]:
            if isinstance(entry, dict) and entry.get("error") and entry["error"] not in why:
                why.append(entry["error"])
        result["stderr"] = err
        module.fail_json(
            msg="roce-route probe --listen listened on none of the rails' addresses: " + "; ".join(why), rc=rc, **result
        )

    # Exit 1 (or 6) without an error: the probe ran and some pair has a
    # problem (or could not be verified).
    if not error and (rc == 0 or (rc in (1, 6) and "probes" in doc) or (rc == 6 and "listening" in doc)):
        if p["self_only"]:
            # `self` cannot be a keyword of exit_json(self, **kwargs): this is
            # what exit_json does, with the result as a dict.
            result["self"] = doc.get("self")
            module.do_cleanup_files()
            module._return_formatted(result)
            sys.exit(0)
        module.exit_json(**result)

    rr.fail_tool_error(module, doc, rc, err, result, "roce-route probe failed (exit %d)" % rc, error_key="error")


if __name__ == "__main__":
    main()
