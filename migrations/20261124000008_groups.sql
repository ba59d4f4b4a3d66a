-- Comparisons across systems. An anchor may name the group (the system or model whose output
-- was judged); NULL for anchors without one, and for every anchor stored before. A version
-- records how its held-out bias varies between those groups (JSON; NULL where its anchors
-- carry fewer than two groups, or for versions trained before).
ALTER TABLE anchors ADD COLUMN group_name TEXT;
ALTER TABLE calibrators ADD COLUMN groups TEXT;
