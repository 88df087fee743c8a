-- TPC-H Q3, shipping priority, DP form: the revenue of the BUILDING segment's unshipped
-- orders per ship mode (public keys) instead of per order (one customer per order: no order
-- would pass any threshold).
SELECT
    l_shipmode,
    SUM(l_extendedprice * (1 - l_discount)) AS revenue,
    COUNT(DISTINCT o_custkey) AS customers
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING'
  AND c_custkey = o_custkey
  AND l_orderkey = o_orderkey
  AND o_orderdate < DATE '1995-03-15'
  AND l_shipdate > DATE '1995-03-15'
GROUP BY l_shipmode
ORDER BY revenue DESC
