"""Documentation shared by every gpuforge.cluster module (extends_documentation_fragment).

The modules extend ansible.builtin.action_common_attributes (the descriptions of check_mode, diff_mode and
platform) and then these fragments, which give the values gpuforge's modules share; a module states only what it
does differently (a module's own attribute keys win over a fragment's, ansible-core
lib/ansible/utils/plugin_docs.py merge_fragment). The layout follows community.general's
plugins/doc_fragments/attributes.py (its INFO_MODULE fragment).
"""

from __future__ import annotations


class ModuleDocFragment:
    # gpuforge.cluster.common - every module: its authors, and the platform (Debian-only modules say debian).
    DOCUMENTATION = r"""
author:
  - gpuforge maintainers (@gpuforge)
attributes:
  platform:
    platforms: posix
"""

    # gpuforge.cluster.common.read_only - a module that reads and judges the node and changes nothing on it.
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    details: Reads state only; check mode runs the same reads and judges them the same way.
  diff_mode:
    support: none
notes:
  - Never changes the node; C(changed) is always false.
"""
