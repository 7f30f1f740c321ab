# -*- coding: utf-8 -*-
# What the roce_route and roce_route_probe modules share: running the
# roce-route binary with --json and reading its JSON envelope.
# MIT licensed, like roce-route itself.
#
# One file, two import names (see ansible/README.md): beside a playbook's
# library/ it is ansible.module_utils.roce_route_cli (this module_utils/
# directory next to the playbook or in the role); in the collection
# roce_route.fleet it is
# ansible_collections.roce_route.fleet.plugins.module_utils.roce_route_cli
# (plugins/module_utils/roce_route_cli.py is a link to this file).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os


def common_argument_spec():
    """The options both modules take (documented in each module's DOCUMENTATION)."""
    return dict(
        netns=dict(type="str"),
        state_dir=dict(type="path"),
        binary=dict(type="path", default="roce-route"),
    )


def base_command(module):
    """The command line up to the subcommand: the binary (a path, or a name looked up
    in PATH, /usr/sbin and /usr/local/sbin; the task fails when it is not found),
    --json, and --netns / --state-dir when given."""
    p = module.params
    binary = p["binary"]
    if os.sep not in binary:
        binary = module.get_bin_path(binary, required=True, opt_dirs=["/usr/sbin", "/usr/local/sbin"])
    cmd = [binary, "--json"]
    if p["netns"]:
        cmd += ["--netns", p["netns"]]
    if p["state_dir"]:
        cmd += ["--state-dir", p["state_dir"]]
    return cmd


def tool_document(module, cmd, rc, out, err, error_key=None, **fail_extra):
    """The tool's JSON document (a dict) from the stdout `out` of `cmd`, its warnings
    passed on as Ansible warnings. When it printed none (e.g. a command line clap
    refused), fails the task with what it printed, plus `fail_extra` and, when
    `error_key` is given, that text under error_key too."""
    try:
        doc = json.loads(out)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
    except ValueError:
        detail = (err or out).strip()
        if error_key:
            fail_extra[error_key] = detail
        module.fail_json(
            msg="roce-route printed no JSON document (exit %d): %s" % (rc, detail),
            rc=rc, cmd=cmd, stdout=out, stderr=err, changed=False, **fail_extra
        )
    for warning in doc.get("warnings") or []:
        module.warn(str(warning))
    return doc


def fail_tool_error(module, doc, rc, err, result, fallback, error_key=None):
    """Fails the task with the tool's error.message (or `fallback` when it gave none)
    and its error.kind as error_kind, beside `result`; the message also under
    error_key when given."""
    error = doc.get("error")
    msg = error.get("message") if isinstance(error, dict) else None
    if not msg:
        msg = (err or fallback).strip()
    if error_key:
        result[error_key] = msg
    result["error_kind"] = error.get("kind") if isinstance(error, dict) else None
    result["stderr"] = err
    module.fail_json(msg=msg, rc=rc, **result)
