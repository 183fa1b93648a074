"""Judge validity: rubrics as data, imported conversations, human labels, the judge's scores and agreement."""
