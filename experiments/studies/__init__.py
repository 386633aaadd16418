"""The LLM studies: Hydra apps that run language models over fixed inputs (hand labels, labelled pairs, the answers of
finished runs) and write a study folder (lethebench.studies.StudyFolder) that analysis and the report only read."""
