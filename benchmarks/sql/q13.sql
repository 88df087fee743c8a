-- TPC-H Q13, customer distribution, as written: a per-customer aggregate (one row per
-- customer) and a histogram of it; the order counts are private keys (needs delta > 0).
SELECT
    c_count,
    COUNT(*) AS custdist
FROM (
    SELECT c_custkey, COUNT(o_orderkey) AS c_count
    FROM customer LEFT OUTER JOIN orders
        ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
    GROUP BY c_custkey
) AS c_orders
GROUP BY c_count
ORDER BY custdist DESC, c_count DESC
