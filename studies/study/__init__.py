"""The converged, multi-seed comparison study (issue 13): its protocol and scheduler
(`studies.study.protocol`), its tables (`studies.study.report`) and the cross-checks against
the peers' own code (`studies.study.peer`).

    python -m studies.study run --corpus apnews      # = python -m studies.study.protocol
    python -m studies.study.report --corpus apnews
"""
