-- The ceiling policies evaluated once per statement, not once per row.
--
-- kb.role_ceiling() is a SQL function that reads kb.role_ceilings; PostgreSQL cannot inline a function with
-- a FROM clause, so `classification <= kb.role_ceiling()` ran that lookup for every row a policy checked:
-- as of a date, the versions in force are found by reading every document the role may see, and at 100k
-- chunks (5,500 documents) that scan took 17 ms of a 30 ms statement. Written as a scalar subquery, the
-- ceiling is an InitPlan: computed once, then compared like a constant. The rows each role sees are the same.
ALTER POLICY documents_within_ceiling ON kb.documents USING (classification <= (SELECT kb.role_ceiling()));
ALTER POLICY chunks_within_ceiling ON kb.chunks USING (classification <= (SELECT kb.role_ceiling()));
ALTER POLICY within_ceiling ON kb.lexeme_stats USING (classification <= (SELECT kb.role_ceiling()));
ALTER POLICY within_ceiling ON kb.text_stats USING (classification <= (SELECT kb.role_ceiling()));
