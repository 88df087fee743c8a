-- TPC-H Q1 with private keys: the status code l_returnflag || l_linestatus has no public key
-- set, so a group is released only when its noisy count of customers passes the threshold
-- (needs delta > 0).
SELECT
    l_returnflag || l_linestatus AS status,
    SUM(l_quantity) AS sum_qty,
    SUM(l_extendedprice) AS sum_base_price,
    SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
    -- In DOUBLE: a product of three DECIMAL(15, 2) columns can exceed DECIMAL's 38 digits,
    -- and dpml refuses private arithmetic that can fail on a row's value.
    SUM(CAST(l_extendedprice AS DOUBLE) * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
    AVG(l_quantity) AS avg_qty,
    AVG(l_extendedprice) AS avg_price,
    AVG(l_discount) AS avg_disc,
    COUNT(*) AS count_order
FROM lineitem
WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
GROUP BY l_returnflag || l_linestatus
ORDER BY status
