"""The converged, multi-seed comparison study (issue 13): its protocol as data
(`studies.study.protocol`), the scheduler that runs it (`studies.study.scheduler`), its tables
(`studies.study.report`) and the cross-checks against the peers' own code
(`studies.study.peer`).

    python -m studies.study run --corpus apnews      # = python -m studies.study.scheduler
    python -m studies.study.report --corpus apnews
"""
