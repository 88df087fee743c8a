-- TPC-H Q18, large volume customers, DP form: how many customers placed an order of more than
-- 300 units, and those orders' total value, instead of the list of them.
SELECT
    COUNT(DISTINCT o_custkey) AS customers,
    SUM(o_totalprice) AS total_price
FROM orders
WHERE o_orderkey IN (
    SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING SUM(l_quantity) > 300
)
