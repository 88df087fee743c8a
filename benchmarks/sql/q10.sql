-- TPC-H Q10, returned item reporting, DP form: lost revenue and customers per nation
-- instead of the top 20 customers (a list of customers is what DP protects).
SELECT
    n_name,
    SUM(l_extendedprice * (1 - l_discount)) AS revenue,
    COUNT(DISTINCT c_custkey) AS customers
FROM customer, orders, lineitem, nation
WHERE c_custkey = o_custkey
  AND l_orderkey = o_orderkey
  AND o_orderdate >= DATE '1993-10-01'
  AND o_orderdate < DATE '1994-01-01'
  AND l_returnflag = 'R'
  AND c_nationkey = n_nationkey
GROUP BY n_name
ORDER BY revenue DESC
